//! [`DeviceAdam`]'s state in burn's checkpoint format (`optimizer.bpk`), written and read
//! here so that an eager run and a replayed one resume each other's checkpoints.

use std::collections::HashMap;

use transduce::burn::module::ParamId;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{TensorData, Transaction};

use super::adam::{DeviceAdam, Moments};
use crate::error::{Error, Result};
use crate::train::observe::census;

/// burn's names for Adam's state in an optimizer record: `{param_id}.momentum.moment_1`,
/// `….moment_2` (tensors of the parameter's shape), `{param_id}.momentum.time` and
/// `{param_id}.__rank` (unsigned scalars).
const FIRST: &str = "momentum.moment_1";
const SECOND: &str = "momentum.moment_2";
const TIME: &str = "momentum.time";
const RANK: &str = "__rank";

impl DeviceAdam {
    /// The state as burn's `Adam` saves it (`ModuleOptimizer::into_bytes`): a checkpoint's
    /// `optimizer.bpk` that an eager run resumes from as well. One read of the device.
    pub fn to_record_bytes(&self) -> Result<Vec<u8>> {
        let mut ids: Vec<&ParamId> = self.moments.keys().collect();
        ids.sort_by_key(|id| id.val());
        let mut transaction = Transaction::default().register(self.time.clone());
        for id in &ids {
            let moments = &self.moments[*id];
            transaction = transaction
                .register(moments.first.clone())
                .register(moments.second.clone());
        }
        census::note_read();
        let data = transaction
            .try_execute()
            .map_err(|e| Error::Usage(format!("device read failed: {e:?}")))?;
        let mut data = data.into_iter();
        let time = data
            .next()
            .and_then(|t| t.try_into_vec_as::<i64>().ok())
            .map_or(0, |t| t[0] as u64);
        let data: Vec<TensorData> = data.collect();
        let mut tensors = Vec::new();
        let mut writer_scalars = Vec::new();
        for (id, pair) in ids.iter().zip(data.chunks(2)) {
            let dims = &self.moments[*id].dims;
            for (name, values) in [(FIRST, &pair[0]), (SECOND, &pair[1])] {
                let values = values.clone().convert::<f32>();
                tensors.push(burn_pack::Tensor::new(
                    format!("{}.{name}", id.val()),
                    burn_pack::DType::F32,
                    dims.clone(),
                    Some(id.val()),
                    burn_pack::Bytes::from_bytes_vec(values.into_bytes().to_vec()),
                ));
            }
            writer_scalars.push((format!("{}.{RANK}", id.val()), dims.len() as u64));
            writer_scalars.push((format!("{}.{TIME}", id.val()), time));
        }
        let mut writer = burn_pack::Writer::new(tensors);
        for (key, value) in &writer_scalars {
            writer = writer.with_scalar(key, burn_pack::Scalar::UInt(*value));
        }
        let bytes = writer
            .into_bytes()
            .map_err(|e| Error::Usage(format!("cannot serialize Adam's state: {e:?}")))?;
        Ok(bytes.to_vec())
    }

    /// Adam's state from a checkpoint's `optimizer.bpk` (written by [`Self::to_record_bytes`]
    /// or by burn's `Adam` in an eager run), on `device`, its table `window` steps long.
    pub fn from_record_bytes(bytes: Vec<u8>, device: &Device, window: usize) -> Result<Self> {
        let bad = |message: String| Error::Usage(format!("optimizer state: {message}"));
        let reader = burn_pack::Reader::from_bytes(burn_pack::Bytes::from_bytes_vec(bytes))
            .map_err(|e| bad(format!("not a burnpack record ({e:?})")))?;
        let times: Vec<u64> = reader
            .scalars()
            .iter()
            .filter(|(key, _)| key.ends_with(TIME))
            .map(|(key, value)| match value {
                burn_pack::Scalar::UInt(t) => Ok(*t),
                other => Err(bad(format!("{key} is {other:?}, not a step count"))),
            })
            .collect::<Result<_>>()?;
        let updates = times.iter().copied().max().unwrap_or(0);
        if times.iter().any(|&t| t != updates) {
            return Err(bad(format!(
                "parameters were updated different numbers of times ({:?}); a graph step updates all of them together",
                (times.iter().min(), times.iter().max())
            )));
        }
        let mut adam = DeviceAdam::new(device, updates, window);
        // Per parameter: each moment, flattened, with the parameter's shape.
        type Half = Option<(Tensor<1>, Vec<usize>)>;
        let mut halves: HashMap<u64, [Half; 2]> = HashMap::new();
        for tensor in reader
            .into_tensors()
            .map_err(|e| bad(format!("unreadable tensors ({e:?})")))?
        {
            let (name, dtype, shape, param_id, bytes) = tensor
                .into_parts()
                .map_err(|e| bad(format!("unreadable tensor ({e:?})")))?;
            let slot = if name.ends_with(FIRST) {
                0
            } else if name.ends_with(SECOND) {
                1
            } else {
                return Err(bad(format!("{name}: not Adam's state")));
            };
            let id = param_id.ok_or_else(|| bad(format!("{name} names no parameter")))?;
            let dims: Vec<usize> = shape.iter().copied().collect();
            let n = dims.iter().product::<usize>();
            // Flattened, as the moments are kept.
            let data = TensorData::from_bytes(bytes, [n], dtype).convert::<f32>();
            let flat = Tensor::<1>::from_data(data, &adam.device);
            halves.entry(id).or_default()[slot] = Some((flat, dims));
        }
        for (id, [first, second]) in halves {
            let (Some((first, dims)), Some((second, _))) = (first, second) else {
                return Err(bad(format!("parameter {id} lacks one of its two moments")));
            };
            adam.moments.insert(
                ParamId::from(id),
                Moments {
                    first,
                    second,
                    dims,
                },
            );
        }
        Ok(adam)
    }
}
