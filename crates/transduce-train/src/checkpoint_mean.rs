//! The element-wise mean of checkpoints, for `transduce average`: of a run's last N (§6.1:
//! 5 for the base models, 20 for the big ones), computed on the safetensors files
//! themselves. The same mean over any weights of one architecture (checkpoints of
//! different runs that started from the same weights, e.g. `train --init`) is a "model
//! soup" (Wortsman et al., 2022): one model's cost for part of an ensemble's gain.

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::error::{Error, Result, io};
use crate::train::checkpoint;

/// Averages the newest `last` checkpoints of a run into `out`; returns the steps used.
pub fn average(run_dir: &Path, last: usize, out: &Path) -> Result<Vec<u64>> {
    let all = checkpoint::list(run_dir)?;
    if last == 0 || all.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to average: {} checkpoints in {}",
            all.len(),
            run_dir.display()
        )));
    }
    if all.len() < last {
        return Err(Error::Usage(format!(
            "--last {last}: only {} checkpoints in {} (raise --keep when training)",
            all.len(),
            run_dir.display()
        )));
    }
    let chosen: Vec<(u64, PathBuf)> = all[all.len() - last..].to_vec();
    let paths: Vec<PathBuf> = chosen
        .iter()
        .map(|(_, dir)| dir.join(checkpoint::MODEL_FILE))
        .collect();
    average_files(&paths, out)?;
    Ok(chosen.iter().map(|(s, _)| *s).collect())
}

/// Averages f32 safetensors files of one architecture into `out`.
pub fn average_files(paths: &[PathBuf], out: &Path) -> Result<()> {
    if paths.is_empty() {
        return Err(Error::Usage("nothing to average".into()));
    }
    let files: Vec<(PathBuf, Vec<u8>)> = paths
        .iter()
        .map(|p| std::fs::read(p).map(|b| (p.clone(), b)).map_err(io(p)))
        .collect::<Result<_>>()?;
    let parsed: Vec<SafeTensors> = files
        .iter()
        .map(|(p, b)| {
            SafeTensors::deserialize(b).map_err(|e| Error::Format {
                path: p.clone(),
                message: format!("{e:?}"),
            })
        })
        .collect::<Result<_>>()?;
    for (file, (path, _)) in parsed.iter().zip(&files).skip(1) {
        if file.len() != parsed[0].len() {
            return Err(Error::Format {
                path: path.clone(),
                message: format!(
                    "{} tensors, {} has {}: weights of different models?",
                    file.len(),
                    files[0].0.display(),
                    parsed[0].len()
                ),
            });
        }
    }
    let mut names: Vec<String> = parsed[0].names().into_iter().map(str::to_string).collect();
    names.sort();
    let mut averaged: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for name in &names {
        let mut sum: Vec<f64> = Vec::new();
        let mut shape = Vec::new();
        for (file, (path, _)) in parsed.iter().zip(&files) {
            let view = file.tensor(name).map_err(|_| Error::Format {
                path: path.clone(),
                message: format!("tensor `{name}` is missing: weights of different models?"),
            })?;
            if view.dtype() != Dtype::F32 {
                return Err(Error::Format {
                    path: path.clone(),
                    message: format!("tensor `{name}` is {:?}, expected F32", view.dtype()),
                });
            }
            if sum.is_empty() {
                shape = view.shape().to_vec();
                sum = vec![0.0; shape.iter().product()];
            } else if view.shape() != shape.as_slice() {
                return Err(Error::Format {
                    path: path.clone(),
                    message: format!(
                        "tensor `{name}` has shape {:?}, others {shape:?}",
                        view.shape()
                    ),
                });
            }
            for (acc, b) in sum.iter_mut().zip(view.data().chunks_exact(4)) {
                *acc += f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
            }
        }
        let n = parsed.len() as f64;
        let bytes: Vec<u8> = sum
            .iter()
            .flat_map(|v| ((v / n) as f32).to_le_bytes())
            .collect();
        averaged.push((name.clone(), shape, bytes));
    }
    let views: Vec<(String, TensorView)> = averaged
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).expect("valid view"),
            )
        })
        .collect();
    let bytes = safetensors::serialize(views, None).map_err(|e| Error::Format {
        path: out.to_path_buf(),
        message: e.to_string(),
    })?;
    crate::fsutil::write_atomic(out, &bytes)
}
