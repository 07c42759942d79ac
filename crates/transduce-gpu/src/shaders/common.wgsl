// Shared by every kernel. Constants written as {NAME} are filled in per model (shaders.rs).

// What changes from one dispatch of a recorded step to the next: written once per step.
struct Params {
    // Rows of the batch (decoder rows, or source tokens for the encoder).
    rows: u32,
    // Decoder position being fed (0 for BOS).
    t: u32,
    // Bit 0: the rows carry allowed-token masks.
    flags: u32,
    pad: u32,
}

// One row of the batch: its input token, its source, its position, the row of the previous
// step it continues (beam reordering), its word focus (-1: none), and its length limit
// (the top-k allows EOS alone once the output reaches it; 0xffffffff: the host's masks say).
struct Row {
    token: u32,
    src: u32,
    pos: u32,
    parent: u32,
    focus: i32,
    limit: u32,
}

// A source's first encoder row and its length (sources are stored unpadded).
struct Source {
    offset: u32,
    len: u32,
}
