//! A CUDA buffer's device address, for a library that works on device memory itself
//! (NCCL's collectives, `transduce-train`'s `distributed::nccl`).

use burn::backend::{BackendTensor, DispatchTensorKind};
use burn::tensor::{DType, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::cuda::CudaRuntime;
use cubecl_runtime::runtime::Runtime;

/// The device memory of a tensor on a CUDA device: held, it stays where it is.
pub struct CudaBuffer {
    /// The address of the tensor's first value.
    pub address: u64,
    /// Its values.
    pub len: usize,
    /// The tensor, and cubecl's binding of its memory, kept so the allocation is neither
    /// freed, handed out again nor moved.
    _tensor: Tensor<1>,
    _resource: Box<dyn std::any::Any + Send>,
}

/// The device memory of `tensor`, a contiguous f32 vector on a CUDA device. The caller
/// orders its own work on it after the work queued on the device's stream (a sync).
pub fn cuda_buffer(tensor: &Tensor<1>) -> Result<CudaBuffer, String> {
    let kind = tensor.clone().into_dispatch().kind;
    let fusion = match kind {
        DispatchTensorKind::Cube(BackendTensor::Float(fusion)) => fusion,
        _ => return Err("the tensor is not a float tensor of a cubecl device".into()),
    };
    let client = fusion.client.clone();
    let cube = client.resolve_tensor_float::<CubeBackend>(fusion);
    if cube.dtype != DType::F32 || !cube.is_contiguous() {
        return Err(format!(
            "the tensor is {:?} and {}contiguous: the exchange takes contiguous f32",
            cube.dtype,
            if cube.is_contiguous() { "" } else { "not " }
        ));
    }
    let len = cube.meta.num_elements();
    let resource = cube
        .client
        .get_resource::<<CudaRuntime as Runtime>::Server>(cube.handle.clone())
        .map_err(|e| format!("the tensor's CUDA memory: {e:?}"))?;
    Ok(CudaBuffer {
        address: resource.resource().ptr,
        len,
        _tensor: tensor.clone(),
        _resource: Box::new(resource),
    })
}
