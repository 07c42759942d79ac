//! Fuzzed readers of the import: the page fetches these files from the network, so each of
//! them, given arbitrary and mutated bytes, must give a value or an error (never a panic,
//! which in wasm kills the module) and must not allocate beyond what the input's own size
//! justifies (a hostile header must not ask for 100 GB). The allocations are counted by this
//! test binary's allocator: the most held at once during a read, above what was held
//! before it, is at most 64 × the input plus 1 MB. docs/FUZZING.md has the long runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use transduce_fuzz::{Outcome, Target};
use transduce_import::{marian, pytorch, spm, tensors, vocab};

mod common;
use common::fixture;

/// The system allocator, counting the bytes held and the most held since the last reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            if new >= layout.size() {
                let now =
                    HELD.fetch_add(new - layout.size(), Ordering::Relaxed) + new - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                HELD.fetch_sub(layout.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `read` on `input`, failing if it held more than the bound above at any moment.
fn bounded<T>(input: &[u8], read: impl FnOnce(&[u8]) -> T) -> T {
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = read(input);
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    let bound = 64 * input.len() + (1 << 20);
    assert!(
        used <= bound,
        "a read of {} bytes held {used} bytes at once (bound {bound})",
        input.len()
    );
    out
}

fn file(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One test, so that nothing else allocates while the counts are read.
#[test]
fn every_reader_of_the_import_survives_mutated_input_within_its_memory_bound() {
    let mut total = 0;

    let s = Target::new(
        "import-spm",
        [file("swish/source.spm"), file("swish/target.spm")],
    )
    .cases(400)
    .max_len(1 << 19)
    .run(|b| {
        let r = bounded(b, |b| spm::SentencePiece::parse(b, "source.spm"));
        Outcome::from(&r)
    });
    total += s.cases;

    let vocab_seed = file("swish/vocab.json");
    let s = Target::new(
        "import-vocab",
        [vocab_seed.clone(), b"{}".to_vec(), br#"{"a": 0}"#.to_vec()],
    )
    .dictionary([
        "\"<pad>\": ",
        "\"</s>\": 0",
        "\"<unk>\": 1",
        "18446744073709551615",
        "[]",
    ])
    .cases(2_000)
    .run(|b| {
        let r = bounded(b, vocab::parse_vocab);
        if let Ok(v) = &r {
            // Ids are exactly 0..n, each once.
            assert!(v.iter().enumerate().all(|(i, (_, id))| *id as usize == i));
        }
        Outcome::from(&r)
    });
    total += s.cases;

    let s = Target::new(
        "import-config",
        [
            file("swish/config.json"),
            file("relu/config.json"),
            file("swish/generation_config.json"),
        ],
    )
    .dictionary([
        "\"d_model\": ",
        "\"vocab_size\": ",
        "\"encoder_layers\": ",
        "\"num_beams\": ",
        "\"activation_function\": \"gelu\"",
        "\"pad_token_id\": ",
    ])
    .cases(5_000)
    .run(|b| {
        let r = bounded(b, |b| {
            let json: Result<serde_json::Map<String, serde_json::Value>, _> =
                serde_json::from_slice(b);
            json.ok().map(|config| {
                let generation = config.clone();
                marian::import_config(&config, Some(&generation))
                    .map(|m| m.model.validate().is_ok())
            })
        });
        Outcome::from(matches!(r, Some(Ok(_))))
    });
    total += s.cases;

    let s = Target::new("import-safetensors", [file("swish/model.safetensors")])
        .dictionary([
            "\"dtype\":\"F32\"",
            "\"shape\":[",
            "\"data_offsets\":[",
            "\"BF16\"",
            "4294967296",
        ])
        .cases(2_000)
        .max_len(1 << 19)
        .run(|b| {
            let r = bounded(b, |b| {
                tensors::Tensors::from_safetensors(b).map(|t| {
                    // Every tensor's bytes are its shape's count of its type.
                    for name in t.names() {
                        let raw = t.raw(name).unwrap();
                        let n: usize = raw.shape.iter().product();
                        assert_eq!(raw.data.len(), n * raw.dtype.size(), "{name}");
                    }
                })
            });
            Outcome::from(&r)
        });
    total += s.cases;

    let s = Target::new(
        "import-pytorch",
        [
            file("relu.pytorch_model.bin"),
            file("relu.legacy.pytorch_model.bin"),
        ],
    )
    .dictionary([
        &b"PK\x03\x04"[..],
        b"PK\x01\x02",
        b"PK\x05\x06",
        b"\x80\x02",
        b"ctorch._utils\n_rebuild_tensor_v2\n",
        b"X\x0c\x00\x00\x00FloatStorage",
        b"(((((((((((",
        b"Q",
        b"R",
        b"h\x05",
        b"\xff\xff\xff\xff",
    ])
    .cases(2_000)
    .max_len(1 << 19)
    .run(|b| {
        let r = bounded(b, |b| {
            pytorch::read(b).map(|t| {
                for name in t.names() {
                    let raw = t.raw(name).unwrap();
                    let n: usize = raw.shape.iter().product();
                    assert_eq!(raw.data.len(), n * raw.dtype.size(), "{name}");
                }
            })
        });
        Outcome::from(&r)
    });
    total += s.cases;
    assert!(total > 0);
    hostile_sizes_are_refused_without_allocating_them();
}

fn hostile_sizes_are_refused_without_allocating_them() {
    // A legacy stream whose storage claims 2^60 elements.
    let mut legacy = file("relu.legacy.pytorch_model.bin");
    // The first storage's count follows the pickle of the keys; find it by the keys pickle's
    // STOP and overwrite the 8 bytes after it.
    let (_, at) = pytorch::pickle::load(&legacy, 0).unwrap();
    let mut at = at;
    for _ in 0..4 {
        at = pytorch::pickle::load(&legacy, at).unwrap().1;
    }
    legacy[at..at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = bounded(&legacy, |b| pytorch::read(b).err()).unwrap();
    assert!(e.contains("run past the end of the file"), "{e}");
    // A pickle that asks for a 4 GB string.
    let e = bounded(b"\x80\x02X\xff\xff\xff\xff", |b| {
        pytorch::pickle::load(b, 0).err()
    })
    .unwrap();
    assert!(e.contains("runs past the pickle"), "{e}");
    // Nesting a million deep.
    let deep: Vec<u8> = std::iter::once(0x80)
        .chain([2])
        .chain(std::iter::repeat_n(b']', 1_000_000))
        .chain(std::iter::repeat_n(b'a', 999_999))
        .collect();
    let r = bounded(&deep, |b| pytorch::pickle::load(b, 0).map(|_| ()));
    assert!(r.unwrap_err().contains("nested deeper"));
    // A safetensors header that claims a terabyte.
    let mut st = b"\x40\x00\x00\x00\x00\x00\x00\x00".to_vec();
    st.extend_from_slice(
        br#"{"a":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}}"#,
    );
    st.resize(8 + 64, b' ');
    assert!(bounded(&st, |b| tensors::Tensors::from_safetensors(b).is_err()));
}
