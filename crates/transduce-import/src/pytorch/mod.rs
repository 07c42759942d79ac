//! `pytorch_model.bin` read from its bytes, with no Python: both forms `torch.save` writes.
//!
//! - **zip** (PyTorch ≥ 1.6): `ARCHIVE/data.pkl` holds the state dict's pickle, and each
//!   storage is the stored entry `ARCHIVE/data/KEY` ([`zip`]).
//! - **legacy** (PyTorch ≤ 1.5, many OPUS-MT checkpoints of 2020): five pickles in a row
//!   (the magic number, the protocol version 1001, the system info, the state dict, the
//!   sorted storage keys), then each storage as an 8-byte element count and its bytes.
//!
//! In both, a tensor is `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)`
//! over a persistent id `('storage', torch.FloatStorage, KEY, location, numel)`
//! ([`pickle`]). Tensors are returned as slices of the input: nothing is copied.

pub mod pickle;
pub mod zip;

use std::collections::HashMap;

use pickle::Value;

use crate::tensors::{FloatType, TensorRef, Tensors};

/// The legacy format's first pickle: 0x1950a86a20f9469cfc6c, little-endian.
const MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
const LEGACY_PROTOCOL: i64 = 1001;

/// A storage as a persistent id names it.
#[derive(Clone, Debug)]
struct Storage {
    key: String,
    /// Element size in bytes, and the float type where it is one.
    element: usize,
    float: Option<FloatType>,
    numel: usize,
}

/// A tensor of the state dict, before its storage's bytes are found.
struct Pending {
    storage: Storage,
    offset: usize,
    shape: Vec<usize>,
}

/// Reads a `torch.save` checkpoint of a state dict (either form).
pub fn read(bytes: &[u8]) -> Result<Tensors<'_>, String> {
    if zip::is_zip(bytes) {
        read_zip(bytes)
    } else if bytes.starts_with(&[0x80]) {
        read_legacy(bytes)
    } else {
        Err("not a PyTorch checkpoint (neither a zip archive nor a pickle)".into())
    }
}

fn read_zip(bytes: &[u8]) -> Result<Tensors<'_>, String> {
    let entries = zip::entries(bytes)?;
    let pickle = entries
        .iter()
        .filter(|e| e.name.ends_with("data.pkl"))
        .min_by_key(|e| e.name.len())
        .ok_or("the zip archive has no data.pkl: not a torch.save checkpoint")?;
    let prefix = &pickle.name[..pickle.name.len() - "data.pkl".len()];
    if let Some(order) = entries
        .iter()
        .find(|e| e.name == format!("{prefix}byteorder"))
        && order.data != b"little"
    {
        return Err("the checkpoint was saved big-endian; only little-endian is read".into());
    }
    let (root, _) = pickle::load(pickle.data, 0).map_err(|e| format!("data.pkl: {e}"))?;
    let pending = state_dict(&root)?;
    let data: HashMap<&str, &[u8]> = entries
        .iter()
        .filter_map(|e| {
            e.name
                .strip_prefix(prefix)
                .and_then(|n| n.strip_prefix("data/"))
                .map(|key| (key, e.data))
        })
        .collect();
    let mut tensors = HashMap::new();
    for (name, p) in pending {
        let storage = data.get(p.storage.key.as_str()).ok_or_else(|| {
            format!(
                "tensor {name}: storage {} is not in the archive",
                p.storage.key
            )
        })?;
        if let Some(t) = slice(&name, &p, storage)? {
            tensors.insert(name, t);
        }
    }
    Ok(Tensors::new(tensors))
}

fn read_legacy(bytes: &[u8]) -> Result<Tensors<'_>, String> {
    let legacy = |e: String| format!("legacy torch.save stream: {e}");
    let (magic, at) = pickle::load(bytes, 0).map_err(legacy)?;
    if !matches!(&magic, Value::BigInt(b) if **b == MAGIC) {
        return Err("not a PyTorch checkpoint (a pickle without torch.save's magic number)".into());
    }
    let (protocol, at) = pickle::load(bytes, at).map_err(legacy)?;
    if protocol.as_int() != Some(LEGACY_PROTOCOL) {
        return Err(legacy(format!(
            "protocol version {protocol:?}, expected {LEGACY_PROTOCOL}"
        )));
    }
    let (info, at) = pickle::load(bytes, at).map_err(legacy)?;
    if let Value::Dict(d) = &info {
        let little = d
            .items
            .iter()
            .find(|(k, _)| k.as_str() == Some("little_endian"))
            .map(|(_, v)| v.as_int());
        if little == Some(Some(0)) {
            return Err("the checkpoint was saved big-endian; only little-endian is read".into());
        }
    }
    let (root, at) = pickle::load(bytes, at).map_err(legacy)?;
    let pending = state_dict(&root)?;
    let (keys, mut at) = pickle::load(bytes, at).map_err(legacy)?;
    let keys: Vec<String> = keys
        .items()
        .ok_or_else(|| legacy("the storage keys are not a list".into()))?
        .iter()
        .map(|k| k.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| legacy("a storage key is not a string".into()))?;
    // Every storage the state dict names, by key (its element size tells its length).
    let storages: HashMap<&str, &Storage> = pending
        .iter()
        .map(|(_, p)| (p.storage.key.as_str(), &p.storage))
        .collect();
    let mut data: HashMap<&str, &[u8]> = HashMap::new();
    for key in &keys {
        let storage = storages
            .get(key.as_str())
            .ok_or_else(|| legacy(format!("storage {key} is listed but no tensor uses it")))?;
        let count = bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| legacy(format!("storage {key}: cut short before its size")))?;
        at += 8;
        let len = usize::try_from(count)
            .ok()
            .and_then(|n| n.checked_mul(storage.element))
            .filter(|&len| len <= bytes.len() - at)
            .ok_or_else(|| {
                legacy(format!(
                    "storage {key}: {count} elements run past the end of the file (cut short?)"
                ))
            })?;
        data.insert(key, &bytes[at..at + len]);
        at += len;
    }
    let mut tensors = HashMap::new();
    for (name, p) in &pending {
        let storage = data.get(p.storage.key.as_str()).ok_or_else(|| {
            legacy(format!(
                "tensor {name}: storage {} is not in the stream",
                p.storage.key
            ))
        })?;
        if let Some(t) = slice(name, p, storage)? {
            tensors.insert(name.clone(), t);
        }
    }
    Ok(Tensors::new(tensors))
}

/// The tensor's bytes within its storage's; `None` for a tensor that is not floating point.
fn slice<'a>(name: &str, p: &Pending, storage: &'a [u8]) -> Result<Option<TensorRef<'a>>, String> {
    let numel = p
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("tensor {name}: its shape {:?} overflows", p.shape))?;
    let element = p.storage.element;
    let range = p
        .offset
        .checked_add(numel)
        .filter(|&end| end <= p.storage.numel)
        .and_then(|end| Some(p.offset.checked_mul(element)?..end.checked_mul(element)?))
        .filter(|r| r.end <= storage.len())
        .ok_or_else(|| {
            format!(
                "tensor {name}: {numel} elements from offset {} run past its storage {} \
                 ({} bytes)",
                p.offset,
                p.storage.key,
                storage.len()
            )
        })?;
    Ok(p.storage.float.map(|dtype| TensorRef {
        dtype,
        shape: p.shape.clone(),
        data: &storage[range],
    }))
}

/// The state dict's tensors by name: the top-level dict, or the dict under `state_dict` or
/// `model` in a training checkpoint.
fn state_dict(root: &Value) -> Result<Vec<(String, Pending)>, String> {
    let Value::Dict(top) = root else {
        return Err("the checkpoint holds no dict of tensors".into());
    };
    let mut out = tensors_of(&top.items)?;
    if out.is_empty() {
        for key in ["state_dict", "model"] {
            if let Some((_, Value::Dict(inner))) =
                top.items.iter().find(|(k, _)| k.as_str() == Some(key))
            {
                out = tensors_of(&inner.items)?;
                break;
            }
        }
    }
    if out.is_empty() {
        return Err("the checkpoint's dict holds no tensors".into());
    }
    Ok(out)
}

fn tensors_of(items: &[(Value, Value)]) -> Result<Vec<(String, Pending)>, String> {
    let mut out = Vec::new();
    for (key, value) in items {
        let Some(name) = key.as_str() else { continue };
        if let Some(p) = tensor(name, value, 0)? {
            out.push((name.to_string(), p));
        }
    }
    Ok(out)
}

/// The tensor `value` rebuilds, if it is one.
fn tensor(name: &str, value: &Value, depth: usize) -> Result<Option<Pending>, String> {
    let Value::Call(call) = value else {
        return Ok(None);
    };
    let (callable, args) = (&call.0, &call.1);
    let Some(("torch._utils", function)) = callable.global() else {
        return Ok(None);
    };
    let args = args.items().unwrap_or(&[]);
    let bad = |what: &str| format!("tensor {name}: {function} {what}");
    match function {
        "_rebuild_parameter" | "_rebuild_parameter_with_state" if depth == 0 => {
            match args.first() {
                Some(inner) => tensor(name, inner, 1),
                None => Err(bad("without arguments")),
            }
        }
        "_rebuild_tensor_v2" | "_rebuild_tensor" => {
            let [storage, offset, size, stride, ..] = args else {
                return Err(bad("with fewer than 4 arguments"));
            };
            let storage = persistent_storage(storage).ok_or_else(|| bad("without a storage"))?;
            let offset = offset
                .as_int()
                .and_then(|o| usize::try_from(o).ok())
                .ok_or_else(|| bad("with a bad offset"))?;
            let dims = |v: &Value| -> Option<Vec<usize>> {
                v.items()?
                    .iter()
                    .map(|d| d.as_int().and_then(|d| usize::try_from(d).ok()))
                    .collect()
            };
            let shape = dims(size).ok_or_else(|| bad("with a bad size"))?;
            let stride = dims(stride).ok_or_else(|| bad("with a bad stride"))?;
            if stride.len() != shape.len() {
                return Err(bad("with a stride of another rank than its size"));
            }
            // Row-major (the only layout a state dict's tensors have), dims of one aside.
            let mut expected = 1usize;
            for (d, s) in shape.iter().zip(&stride).rev() {
                if *d > 1 && *s != expected {
                    return Err(format!(
                        "tensor {name}: stride {stride:?} for size {shape:?} is not row-major"
                    ));
                }
                expected = expected.saturating_mul(*d);
            }
            Ok(Some(Pending {
                storage,
                offset,
                shape,
            }))
        }
        _ => Ok(None),
    }
}

/// `('storage', torch.XStorage, key, location, numel[, view])` as a storage.
fn persistent_storage(value: &Value) -> Option<Storage> {
    let Value::Persistent(pid) = value else {
        return None;
    };
    let items = pid.items()?;
    if items.first()?.as_str()? != "storage" {
        return None;
    }
    let (_, kind) = items.get(1)?.global()?;
    let key = items.get(2)?.as_str()?.to_string();
    let numel = usize::try_from(items.get(4)?.as_int()?).ok()?;
    let (element, float) = match kind {
        "FloatStorage" => (4, Some(FloatType::F32)),
        "HalfStorage" => (2, Some(FloatType::F16)),
        "BFloat16Storage" => (2, Some(FloatType::BF16)),
        "DoubleStorage" | "LongStorage" | "ComplexFloatStorage" => (8, None),
        "ComplexDoubleStorage" => (16, None),
        "IntStorage" => (4, None),
        "ShortStorage" => (2, None),
        "CharStorage" | "ByteStorage" | "BoolStorage" | "QInt8Storage" | "QUInt8Storage" => {
            (1, None)
        }
        _ => return None,
    };
    Some(Storage {
        key,
        element,
        float,
        numel,
    })
}
