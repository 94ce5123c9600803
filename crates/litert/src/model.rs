//! A LiteRT model being built: tensors, constant buffers and operators of
//! one subgraph, serialized by [`ModelBuilder::finish`] as a `.tflite`
//! flatbuffer (file identifier `TFL3`, schema version 3).

use crate::schema::litert as fb;
use std::collections::HashMap;

/// The element type of a tensor in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
    I32,
    I8,
}

impl Elem {
    fn fb(self) -> fb::TensorType {
        match self {
            Elem::F32 => fb::TensorType::FLOAT32,
            Elem::F16 => fb::TensorType::FLOAT16,
            Elem::I32 => fb::TensorType::INT32,
            Elem::I8 => fb::TensorType::INT8,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Elem::F32 | Elem::I32 => 4,
            Elem::F16 => 2,
            Elem::I8 => 1,
        }
    }

    /// The manifest's name of the type (`f32`, `f16`, `i32`, `i8`).
    pub fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::F16 => "f16",
            Elem::I32 => "i32",
            Elem::I8 => "i8",
        }
    }
}

/// Affine quantization: one scale and zero point per tensor, or one per
/// slice along `axis`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quant {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub axis: usize,
}

impl Quant {
    /// Per-tensor parameters.
    pub fn tensor(scale: f32, zero_point: i64) -> Quant {
        Quant {
            scale: vec![scale],
            zero_point: vec![zero_point],
            axis: 0,
        }
    }
}

/// A tensor of the subgraph.
#[derive(Clone, Debug)]
pub struct TensorDef {
    pub name: String,
    pub elem: Elem,
    pub shape: Vec<usize>,
    pub quant: Option<Quant>,
    /// Index into the buffers; 0 is the empty buffer (an activation).
    pub buffer: u32,
}

/// An operator's builtin options.
#[derive(Clone, Debug)]
pub enum Options {
    None,
    /// A convolution or pool.
    Window(Window),
    FullyConnected {
        act: Act,
    },
    Softmax,
    Concat {
        axis: usize,
        act: Act,
    },
    Add(Act),
    Mul(Act),
    Sub(Act),
    Div(Act),
    Reshape(Vec<usize>),
    Reducer {
        keep_dims: bool,
    },
    LeakyRelu(f32),
    ResizeBilinear {
        align_corners: bool,
        half_pixel: bool,
    },
    ResizeNearest {
        align_corners: bool,
        half_pixel: bool,
    },
    Empty(EmptyOptions),
}

/// The options of window operators.
#[derive(Clone, Debug)]
pub enum Window {
    Conv {
        same: bool,
        stride: [usize; 2],
        dilation: [usize; 2],
        act: Act,
    },
    Depthwise {
        same: bool,
        stride: [usize; 2],
        dilation: [usize; 2],
        multiplier: usize,
        act: Act,
    },
    Pool {
        same: bool,
        stride: [usize; 2],
        filter: [usize; 2],
        act: Act,
    },
}

/// Builtin options tables without fields, by the union member they fill.
#[derive(Clone, Copy, Debug)]
pub enum EmptyOptions {
    Pad,
    PadV2,
    Transpose,
    Dequantize,
    Quantize,
    HardSwish,
    MaximumMinimum,
    Slice,
}

/// A fused activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Act {
    #[default]
    None,
    Relu,
    Relu6,
}

impl Act {
    pub(crate) fn fb(self) -> fb::ActivationFunctionType {
        match self {
            Act::None => fb::ActivationFunctionType::NONE,
            Act::Relu => fb::ActivationFunctionType::RELU,
            Act::Relu6 => fb::ActivationFunctionType::RELU6,
        }
    }
}

/// A builtin operator and the version of it the file asks for.
pub type Code = (fb::BuiltinOperator, i32);

#[derive(Clone, Debug)]
struct OpDef {
    code: usize,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    options: Options,
}

/// One subgraph's model under construction.
#[derive(Default)]
pub struct ModelBuilder {
    tensors: Vec<TensorDef>,
    /// Buffer 0 is empty, as LiteRT expects.
    buffers: Vec<Vec<u8>>,
    codes: Vec<Code>,
    code_index: HashMap<(i32, i32), usize>,
    ops: Vec<OpDef>,
    names: HashMap<String, usize>,
}

impl ModelBuilder {
    pub fn new() -> ModelBuilder {
        ModelBuilder {
            buffers: vec![Vec::new()],
            ..Default::default()
        }
    }

    /// A name not yet used by a tensor, from `base`.
    fn unique(&mut self, base: &str) -> String {
        let n = self.names.entry(base.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base.to_string()
        } else {
            format!("{base}_{}", *n - 1)
        }
    }

    /// Keeps `name` for a tensor renamed to it later: tensors made from
    /// the same base get a suffix.
    pub fn reserve(&mut self, name: &str) {
        self.names.entry(name.to_string()).or_insert(1);
    }

    /// A new activation tensor (no data).
    pub fn activation(&mut self, name: &str, elem: Elem, shape: Vec<usize>, quant: Option<Quant>) -> i32 {
        let name = self.unique(name);
        self.tensors.push(TensorDef {
            name,
            elem,
            shape,
            quant,
            buffer: 0,
        });
        (self.tensors.len() - 1) as i32
    }

    /// A new constant tensor holding `data` (little-endian elements).
    pub fn constant(&mut self, name: &str, elem: Elem, shape: Vec<usize>, data: Vec<u8>, quant: Option<Quant>) -> i32 {
        debug_assert_eq!(data.len(), shape.iter().product::<usize>() * elem.size());
        self.buffers.push(data);
        let buffer = (self.buffers.len() - 1) as u32;
        let name = self.unique(name);
        self.tensors.push(TensorDef {
            name,
            elem,
            shape,
            quant,
            buffer,
        });
        (self.tensors.len() - 1) as i32
    }

    /// A float constant.
    pub fn const_f32(&mut self, name: &str, shape: Vec<usize>, values: &[f32]) -> i32 {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(name, Elem::F32, shape, data, None)
    }

    /// An int32 constant (shapes, axes, paddings, biases).
    pub fn const_i32(&mut self, name: &str, shape: Vec<usize>, values: &[i32], quant: Option<Quant>) -> i32 {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(name, Elem::I32, shape, data, quant)
    }

    pub fn tensor(&self, t: i32) -> &TensorDef {
        &self.tensors[t as usize]
    }

    /// Renames tensor `t` (a subgraph boundary keeps the bundle's name).
    pub fn rename(&mut self, t: i32, name: &str) {
        self.tensors[t as usize].name = name.to_string();
    }

    /// Appends an operator.
    pub fn op(&mut self, code: Code, inputs: &[i32], outputs: &[i32], options: Options) {
        let key = (code.0.0, code.1);
        let next = self.codes.len();
        let index = *self.code_index.entry(key).or_insert(next);
        if index == next {
            self.codes.push(code);
        }
        self.ops.push(OpDef {
            code: index,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            options,
        });
    }

    /// The number of operators so far.
    pub fn op_count(&self) -> usize {
        self.ops.len()
    }

    /// The builtin operators used, by name.
    pub fn operator_names(&self) -> Vec<&'static str> {
        self.codes.iter().filter_map(|(c, _)| c.variant_name()).collect()
    }

    /// The model as `.tflite` bytes, with `inputs` and `outputs` as the
    /// subgraph's boundary and `description` in the file.
    pub fn finish(&self, inputs: &[i32], outputs: &[i32], description: &str) -> Vec<u8> {
        let mut b = flatbuffers::FlatBufferBuilder::with_capacity(1 << 16);
        let buffers: Vec<_> = self
            .buffers
            .iter()
            .map(|d| {
                let data = (!d.is_empty()).then(|| aligned_bytes(&mut b, d));
                fb::Buffer::create(&mut b, &fb::BufferArgs { data })
            })
            .collect();
        let tensors: Vec<_> = self.tensors.iter().map(|t| tensor(&mut b, t)).collect();
        let ops: Vec<_> = self.ops.iter().map(|o| operator(&mut b, o)).collect();
        let codes: Vec<_> = self
            .codes
            .iter()
            .map(|(c, version)| {
                fb::OperatorCode::create(
                    &mut b,
                    &fb::OperatorCodeArgs {
                        deprecated_builtin_code: c.0.min(127) as i8,
                        custom_code: None,
                        version: *version,
                        builtin_code: *c,
                    },
                )
            })
            .collect();
        let sub = fb::SubGraphArgs {
            tensors: Some(b.create_vector(&tensors)),
            inputs: Some(b.create_vector(inputs)),
            outputs: Some(b.create_vector(outputs)),
            operators: Some(b.create_vector(&ops)),
            name: Some(b.create_string("main")),
        };
        let sub = fb::SubGraph::create(&mut b, &sub);
        let model = fb::ModelArgs {
            version: 3,
            operator_codes: Some(b.create_vector(&codes)),
            subgraphs: Some(b.create_vector(&[sub])),
            description: Some(b.create_string(description)),
            buffers: Some(b.create_vector(&buffers)),
            metadata: None,
        };
        let model = fb::Model::create(&mut b, &model);
        fb::finish_model_buffer(&mut b, model);
        b.finished_data().to_vec()
    }
}

/// Sets the alignment of a vector's start to 16 bytes (LiteRT's schema
/// asks buffers for `force_align: 16`); pushes nothing itself.
struct Align16;

impl flatbuffers::Push for Align16 {
    type Output = u8;
    unsafe fn push(&self, _dst: &mut [u8], _written_len: usize) {}
    fn alignment() -> flatbuffers::PushAlignment {
        flatbuffers::PushAlignment::new(16)
    }
}

fn aligned_bytes<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    d: &[u8],
) -> flatbuffers::WIPOffset<flatbuffers::Vector<'a, u8>> {
    b.start_vector::<Align16>(d.len());
    for x in d.iter().rev() {
        b.push(*x);
    }
    b.end_vector::<u8>(d.len())
}

fn tensor<'a>(b: &mut flatbuffers::FlatBufferBuilder<'a>, t: &TensorDef) -> flatbuffers::WIPOffset<fb::Tensor<'a>> {
    let shape: Vec<i32> = t.shape.iter().map(|d| *d as i32).collect();
    let quantization = t.quant.as_ref().map(|q| {
        let args = fb::QuantizationParametersArgs {
            min: None,
            max: None,
            scale: Some(b.create_vector(&q.scale)),
            zero_point: Some(b.create_vector(&q.zero_point)),
            quantized_dimension: q.axis as i32,
        };
        fb::QuantizationParameters::create(b, &args)
    });
    let args = fb::TensorArgs {
        shape: Some(b.create_vector(&shape)),
        type_: t.elem.fb(),
        buffer: t.buffer,
        name: Some(b.create_string(&t.name)),
        quantization,
    };
    fb::Tensor::create(b, &args)
}

fn operator<'a>(b: &mut flatbuffers::FlatBufferBuilder<'a>, o: &OpDef) -> flatbuffers::WIPOffset<fb::Operator<'a>> {
    let (kind, options) = crate::options::write(b, &o.options);
    let args = fb::OperatorArgs {
        opcode_index: o.code as u32,
        inputs: Some(b.create_vector(&o.inputs)),
        outputs: Some(b.create_vector(&o.outputs)),
        builtin_options_type: kind,
        builtin_options: options,
    };
    fb::Operator::create(b, &args)
}
