//! Typed access to a node's ONNX attributes with errors naming node and attribute.

use super::ImportError;
use onnx_ir::{AttributeProto, AttributeType, NodeProto, TensorProto};

/// The attributes of one ONNX node.
pub(super) struct Attrs<'a> {
    pub node: &'a NodeProto,
    pub name: &'a str,
}

impl<'a> Attrs<'a> {
    fn get(&self, key: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == key)
    }

    fn kind(a: &AttributeProto) -> Option<AttributeType> {
        a.type_.enum_value().ok()
    }

    /// An error about attribute `key` of this node.
    pub fn err(&self, key: &str, reason: impl Into<String>) -> ImportError {
        ImportError::BadAttribute {
            node: self.name.to_string(),
            op_type: self.node.op_type.clone(),
            attribute: key.to_string(),
            reason: reason.into(),
        }
    }

    fn check(&self, a: &AttributeProto, want: AttributeType) -> Result<(), ImportError> {
        match Self::kind(a) {
            Some(k) if k == want || k == AttributeType::UNDEFINED => Ok(()),
            other => Err(self.err(&a.name, format!("expected {want:?}, found {other:?}"))),
        }
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn int(&self, key: &str, default: i64) -> Result<i64, ImportError> {
        match self.get(key) {
            None => Ok(default),
            Some(a) => self.check(a, AttributeType::INT).map(|_| a.i),
        }
    }

    pub fn ints(&self, key: &str) -> Result<Option<Vec<i64>>, ImportError> {
        match self.get(key) {
            None => Ok(None),
            Some(a) => self.check(a, AttributeType::INTS).map(|_| Some(a.ints.clone())),
        }
    }

    pub fn float(&self, key: &str, default: f32) -> Result<f32, ImportError> {
        match self.get(key) {
            None => Ok(default),
            Some(a) => self.check(a, AttributeType::FLOAT).map(|_| a.f),
        }
    }

    pub fn floats(&self, key: &str) -> Result<Option<Vec<f32>>, ImportError> {
        match self.get(key) {
            None => Ok(None),
            Some(a) => self.check(a, AttributeType::FLOATS).map(|_| Some(a.floats.clone())),
        }
    }

    pub fn string(&self, key: &str, default: &str) -> Result<String, ImportError> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(a) => {
                self.check(a, AttributeType::STRING)?;
                String::from_utf8(a.s.to_vec()).map_err(|_| self.err(key, "not valid UTF-8"))
            }
        }
    }

    pub fn tensor(&self, key: &str) -> Result<Option<&'a TensorProto>, ImportError> {
        match self.get(key) {
            None => Ok(None),
            Some(a) => self.check(a, AttributeType::TENSOR).map(|_| a.t.as_ref()),
        }
    }

    /// Non-negative integers of a list attribute, with a default when absent
    /// and a required length when `len` is given.
    pub fn usizes(&self, key: &str, default: &[usize], len: Option<usize>) -> Result<Vec<usize>, ImportError> {
        let Some(v) = self.ints(key)? else {
            return Ok(default.to_vec());
        };
        if let Some(n) = len
            && v.len() != n
        {
            return Err(self.err(key, format!("expected {n} values, got {v:?}")));
        }
        v.iter()
            .map(|&x| usize::try_from(x).map_err(|_| self.err(key, format!("negative value in {v:?}"))))
            .collect()
    }
}
