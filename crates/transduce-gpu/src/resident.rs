//! What a model keeps on the GPU while it lives: the device, the weights, the compiled
//! shaders and the position tables. Workspaces are made for it and decode over it; the
//! public [`crate::GpuModel`] holds it beside its cached workspace and counts.

use transduce::ModelConfig;
use transduce::embedding::sinusoid_table;

use crate::device::Gpu;
use crate::shaders::Shaders;
use crate::weights::Weights;

/// Position tables: the model's learned ones (source, target), or §3.5's sinusoids.
pub(crate) enum Positions {
    Learned(Vec<f32>, Vec<f32>),
    Sinusoid,
}

/// A model's weights and shaders on its device.
pub(crate) struct Resident {
    pub gpu: Gpu,
    pub config: ModelConfig,
    pub weights: Weights,
    pub shaders: Shaders,
    pub positions: Positions,
}

impl Resident {
    /// Source and target positions `[rows, d_model]`.
    pub fn position_tables(&self, rows: usize) -> (Vec<f32>, Vec<f32>) {
        match &self.positions {
            Positions::Learned(src, tgt) => (src.clone(), tgt.clone()),
            Positions::Sinusoid => {
                let table = sinusoid_table(0, rows, self.config.d_model);
                (table.clone(), table)
            }
        }
    }

    /// A storage buffer holding `values`.
    pub fn upload(&self, values: &[f32]) -> wgpu::Buffer {
        self.gpu.storage_buffer(bytemuck::cast_slice(values))
    }
}
