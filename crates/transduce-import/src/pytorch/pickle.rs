//! The part of Python's pickle machine that `torch.save` uses for a state dict (protocols
//! 2–5): dicts, lists and tuples of strings, numbers, globals, persistent ids (PyTorch's
//! storages) and the calls that rebuild tensors. Other objects stay opaque; nothing is ever
//! executed.
//!
//! The input is untrusted (the browser fetches it), so every read is bounds-checked, memo
//! entries are shared rather than copied, and nesting is limited: a hostile stream can
//! neither panic nor make the machine hold more than a small multiple of its own length.

use std::collections::HashMap;
use std::rc::Rc;

/// The deepest nesting of containers accepted (a state dict nests three or four levels).
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond 64 bits, little-endian two's complement (PyTorch's magic number).
    BigInt(Rc<[u8]>),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tuple(Rc<Container>),
    List(Rc<Container>),
    Dict(Rc<DictValue>),
    /// `module.name`, as GLOBAL and STACK_GLOBAL name it.
    Global(Rc<(String, String)>),
    /// What `persistent_load` would be handed: the persistent id.
    Persistent(Rc<Value>),
    /// A call the machine does not perform: the callable and its arguments.
    Call(Rc<(Value, Value)>),
    Mark,
}

#[derive(Debug, Default)]
pub struct Container {
    pub items: Vec<Value>,
    depth: usize,
}

#[derive(Debug, Default)]
pub struct DictValue {
    pub items: Vec<(Value, Value)>,
    depth: usize,
}

impl Value {
    fn depth(&self) -> usize {
        match self {
            Value::Tuple(c) | Value::List(c) => c.depth,
            Value::Dict(d) => d.depth,
            Value::Persistent(v) => v.depth() + 1,
            Value::Call(c) => c.0.depth().max(c.1.depth()) + 1,
            _ => 0,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The items of a tuple or list.
    pub fn items(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(c) | Value::List(c) => Some(&c.items),
            _ => None,
        }
    }

    pub fn global(&self) -> Option<(&str, &str)> {
        match self {
            Value::Global(g) => Some((&g.0, &g.1)),
            _ => None,
        }
    }
}

fn container(items: Vec<Value>) -> Result<Rc<Container>, String> {
    let depth = items.iter().map(Value::depth).max().unwrap_or(0) + 1;
    if depth > MAX_DEPTH {
        return Err(format!("containers nested deeper than {MAX_DEPTH}"));
    }
    Ok(Rc::new(Container { items, depth }))
}

fn dict(items: Vec<(Value, Value)>) -> Result<Rc<DictValue>, String> {
    let depth = items
        .iter()
        .map(|(k, v)| k.depth().max(v.depth()))
        .max()
        .unwrap_or(0)
        + 1;
    if depth > MAX_DEPTH {
        return Err(format!("containers nested deeper than {MAX_DEPTH}"));
    }
    Ok(Rc::new(DictValue { items, depth }))
}

struct Machine<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Value>,
    /// Where each MARK was pushed (indices into `stack`).
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
}

/// Runs one pickle from `bytes[start..]`; its value and where it ended (after STOP).
pub fn load(bytes: &[u8], start: usize) -> Result<(Value, usize), String> {
    let mut m = Machine {
        bytes,
        at: start,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let value = m.run()?;
    Ok((value, m.at))
}

impl<'a> Machine<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| format!("byte {}: the pickle ends inside an argument", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A length read from the stream, checked against what is left of it.
    fn len(&mut self, n: u64) -> Result<usize, String> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.at)
            .ok_or_else(|| format!("byte {}: a length of {n} runs past the pickle", self.at))
    }

    fn line(&mut self) -> Result<&'a str, String> {
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| format!("byte {}: a GLOBAL without its line end", self.at))?;
        let line = std::str::from_utf8(&rest[..end])
            .map_err(|_| format!("byte {}: a GLOBAL name that is not UTF-8", self.at))?;
        self.at += end + 1;
        Ok(line)
    }

    fn string(&mut self, n: usize) -> Result<Value, String> {
        let at = self.at;
        let bytes = self.take(n)?;
        let s = std::str::from_utf8(bytes).map_err(|_| format!("byte {at}: invalid UTF-8"))?;
        Ok(Value::Str(Rc::from(s)))
    }

    fn pop(&mut self) -> Result<Value, String> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(format!("byte {}: the stack is empty", self.at));
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    fn top(&mut self) -> Result<&mut Value, String> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(format!("byte {}: the stack is empty", self.at));
        }
        Ok(self.stack.last_mut().expect("checked above"))
    }

    /// The items pushed since the last MARK, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| format!("byte {}: no MARK to pop to", self.at))?;
        Ok(self.stack.split_off(mark))
    }

    fn push(&mut self, value: Value) {
        self.stack.push(value);
    }

    fn memo_put(&mut self, key: u32) -> Result<(), String> {
        let value = self.top()?.clone();
        self.memo.insert(key, value);
        Ok(())
    }

    fn memo_get(&mut self, key: u32) -> Result<(), String> {
        let value = self
            .memo
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("byte {}: memo entry {key} was never stored", self.at))?;
        self.push(value);
        Ok(())
    }

    fn set_items(&mut self, pairs: Vec<Value>) -> Result<(), String> {
        if !pairs.len().is_multiple_of(2) {
            return Err(format!("byte {}: SETITEMS with an odd count", self.at));
        }
        let at = self.at;
        let target = self.top()?;
        let Value::Dict(d) = target else {
            return Err(format!("byte {at}: SETITEM on something not a dict"));
        };
        let (mut items, mut depth) = match Rc::try_unwrap(std::mem::take(d)) {
            Ok(d) => (d.items, d.depth),
            Err(shared) => (shared.items.clone(), shared.depth),
        };
        let mut it = pairs.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            depth = depth.max(k.depth().max(v.depth()) + 1);
            items.push((k, v));
        }
        if depth > MAX_DEPTH {
            return Err(format!(
                "byte {at}: containers nested deeper than {MAX_DEPTH}"
            ));
        }
        *target = Value::Dict(Rc::new(DictValue { items, depth }));
        Ok(())
    }

    fn append(&mut self, values: Vec<Value>) -> Result<(), String> {
        let at = self.at;
        let target = self.top()?;
        let Value::List(c) = target else {
            return Err(format!("byte {at}: APPEND to something not a list"));
        };
        let (mut items, mut depth) = match Rc::try_unwrap(std::mem::take(c)) {
            Ok(c) => (c.items, c.depth),
            Err(shared) => (shared.items.clone(), shared.depth),
        };
        for v in &values {
            depth = depth.max(v.depth() + 1);
        }
        if depth > MAX_DEPTH {
            return Err(format!(
                "byte {at}: containers nested deeper than {MAX_DEPTH}"
            ));
        }
        items.extend(values);
        *target = Value::List(Rc::new(Container { items, depth }));
        Ok(())
    }

    fn run(&mut self) -> Result<Value, String> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            match op {
                0x80 => {
                    // PROTO
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(format!("byte {at}: pickle protocol {v} (at most 5)"));
                    }
                }
                0x95 => {
                    // FRAME: a length hint only.
                    self.u64()?;
                }
                b'.' => return self.pop(),
                b'(' => {
                    self.marks.push(self.stack.len());
                    if self.marks.len() > MAX_DEPTH * 4 {
                        return Err(format!("byte {at}: too many open MARKs"));
                    }
                }
                b'}' => self.push(Value::Dict(Rc::default())),
                b']' => self.push(Value::List(Rc::default())),
                b')' => self.push(Value::Tuple(Rc::default())),
                0x8f => self.push(Value::List(Rc::default())), // EMPTY_SET, as a list
                b'N' => self.push(Value::None),
                0x88 => self.push(Value::Bool(true)),
                0x89 => self.push(Value::Bool(false)),
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(i64::from(v)));
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(i64::from(v)));
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push(Value::Int(i64::from(v)));
                }
                0x8a => {
                    // LONG1
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let value = if n == 0 {
                        Value::Int(0)
                    } else if n <= 8 {
                        let mut buf = if b[n - 1] & 0x80 != 0 {
                            [0xff; 8]
                        } else {
                            [0; 8]
                        };
                        buf[..n].copy_from_slice(b);
                        Value::Int(i64::from_le_bytes(buf))
                    } else {
                        Value::BigInt(Rc::from(b))
                    };
                    self.push(value);
                }
                b'G' => {
                    let b = self.take(8)?;
                    self.push(Value::Float(f64::from_be_bytes(b.try_into().expect("8"))));
                }
                b'X' => {
                    let n = self.u32()?;
                    let n = self.len(u64::from(n))?;
                    let v = self.string(n)?;
                    self.push(v);
                }
                0x8c => {
                    let n = usize::from(self.u8()?);
                    let v = self.string(n)?;
                    self.push(v);
                }
                0x8d => {
                    let n = self.u64()?;
                    let n = self.len(n)?;
                    let v = self.string(n)?;
                    self.push(v);
                }
                b'T' | b'B' => {
                    // BINSTRING (Python 2 str) / BINBYTES
                    let n = self.u32()?;
                    let n = self.len(u64::from(n))?;
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)));
                }
                b'U' | b'C' => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)));
                }
                0x8e => {
                    // BINBYTES8
                    let n = self.u64()?;
                    let n = self.len(n)?;
                    let b = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(b)));
                }
                b'c' => {
                    let module = self.line()?.to_string();
                    let name = self.line()?.to_string();
                    self.push(Value::Global(Rc::new((module, name))));
                }
                0x93 => {
                    // STACK_GLOBAL
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module.as_str(), name.as_str()) {
                        (Some(m), Some(n)) => {
                            self.push(Value::Global(Rc::new((m.to_string(), n.to_string()))))
                        }
                        _ => return Err(format!("byte {at}: STACK_GLOBAL of non-strings")),
                    }
                }
                b'q' => {
                    let k = self.u8()?;
                    self.memo_put(u32::from(k))?;
                }
                b'r' => {
                    let k = self.u32()?;
                    self.memo_put(k)?;
                }
                0x94 => {
                    let k = self.memo.len() as u32;
                    self.memo_put(k)?;
                }
                b'h' => {
                    let k = self.u8()?;
                    self.memo_get(u32::from(k))?;
                }
                b'j' => {
                    let k = self.u32()?;
                    self.memo_get(k)?;
                }
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Value::Tuple(container(items)?));
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.push(Value::Tuple(container(items)?));
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Value::List(container(items)?));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if !items.len().is_multiple_of(2) {
                        return Err(format!("byte {at}: DICT with an odd count"));
                    }
                    let mut pairs = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    self.push(Value::Dict(dict(pairs)?));
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                b'e' | 0x90 => {
                    // APPENDS / ADDITEMS
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                0x91 => {
                    // FROZENSET
                    let items = self.pop_mark()?;
                    self.push(Value::List(container(items)?));
                }
                b'R' | 0x81 => {
                    // REDUCE / NEWOBJ
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let value = call(callable, args)?;
                    self.push(value);
                }
                b'b' => {
                    // BUILD: the state (an OrderedDict's `_metadata`, say) is not needed.
                    self.pop()?;
                    self.top()?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let depth = pid.depth();
                    if depth >= MAX_DEPTH {
                        return Err(format!("byte {at}: containers nested too deep"));
                    }
                    self.push(Value::Persistent(Rc::new(pid)));
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.push(v);
                }
                other => {
                    return Err(format!(
                        "byte {at}: pickle opcode 0x{other:02x} is not one torch.save writes"
                    ));
                }
            }
            if self.stack.len() > self.bytes.len() + 16 {
                return Err(format!("byte {at}: the stack outgrew the pickle"));
            }
        }
    }
}

/// A call of `callable` with `args`: the few that build a state dict are made (an empty
/// dict for `OrderedDict()`); every other stays a [`Value::Call`] for the reader to look at.
fn call(callable: Value, args: Value) -> Result<Value, String> {
    if let Some(("collections", "OrderedDict")) = callable.global()
        && args.items().is_some_and(<[Value]>::is_empty)
    {
        return Ok(Value::Dict(Rc::default()));
    }
    let depth = callable.depth().max(args.depth()) + 1;
    if depth > MAX_DEPTH {
        return Err(format!("containers nested deeper than {MAX_DEPTH}"));
    }
    Ok(Value::Call(Rc::new((callable, args))))
}
