//! Our reader of `pytorch_model.bin` (both forms of `torch.save`, from bytes) against
//! burn-store's `pytorch-reader` (from the file): the same tensors, names, shapes and values.

mod common;

use common::fixture;
use transduce_import::tensors::to_f32;

#[test]
fn both_forms_read_as_burns_reader_reads_them() {
    for file in ["relu.pytorch_model.bin", "relu.legacy.pytorch_model.bin"] {
        let path = fixture(file);
        let bytes = std::fs::read(&path).unwrap();
        let ours = transduce_import::pytorch::read(&bytes).unwrap();
        let theirs = pytorch_reader::PytorchReader::new(&path).unwrap();
        let mut names: Vec<&str> = ours.names().collect();
        names.sort();
        let mut expected: Vec<String> = theirs
            .tensors()
            .iter()
            .filter(|(_, t)| {
                matches!(
                    t.dtype(),
                    pytorch_reader::DType::F32
                        | pytorch_reader::DType::F16
                        | pytorch_reader::DType::BF16
                )
            })
            .map(|(n, _)| n.clone())
            .collect();
        expected.sort();
        assert_eq!(names, expected, "{file}: tensor names");
        assert!(names.len() > 40, "{file}: {} tensors", names.len());
        for name in names {
            let t = ours.raw(name).unwrap();
            let r = theirs.get(name).unwrap();
            assert_eq!(t.shape, r.shape(), "{file}: {name}");
            let values = to_f32(t.dtype, t.data);
            let bytes = r.read().unwrap();
            let want: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            assert!(values == want, "{file}: {name} values");
        }
    }
}

#[test]
fn damaged_checkpoints_are_errors_never_panics() {
    for file in ["relu.pytorch_model.bin", "relu.legacy.pytorch_model.bin"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        // Cut anywhere: an error that says what, never a panic.
        for cut in (0..bytes.len()).step_by(997).chain([1, 2, bytes.len() - 1]) {
            if let Err(e) = transduce_import::pytorch::read(&bytes[..cut]) {
                assert!(!e.is_empty());
            }
        }
    }
    let e = transduce_import::pytorch::read(b"<html>").err().unwrap();
    assert!(e.contains("not a PyTorch checkpoint"), "{e}");
}
