//! The zip container of `torch.save` (PyTorch ≥ 1.6): its central directory, read in place.
//! PyTorch stores every entry uncompressed (method 0) and aligns the data to 64 bytes, so an
//! entry is a slice of the file; a compressed entry (a checkpoint re-zipped by hand) is
//! refused by name.

/// One stored entry: its name and its bytes.
pub struct Entry<'a> {
    pub name: String,
    pub data: &'a [u8],
}

const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;
const END64: u32 = 0x0606_4b50;
const END64_LOCATOR: u32 = 0x0706_4b50;

pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && u32_at(bytes, 0) == Some(LOCAL)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn offset(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// Every entry of the archive, in the central directory's order.
pub fn entries(bytes: &[u8]) -> Result<Vec<Entry<'_>>, String> {
    let bad = |what: &str| format!("not a readable zip archive: {what}");
    // The end record is in the last 22 + 65,535 bytes (its comment is at most that long).
    let floor = bytes.len().saturating_sub(22 + 65_535);
    let end = (floor..=bytes.len().saturating_sub(22))
        .rev()
        .find(|&at| u32_at(bytes, at) == Some(END))
        .ok_or_else(|| bad("no end-of-central-directory record (the file is cut short?)"))?;
    let mut count = u64::from(u16_at(bytes, end + 10).ok_or_else(|| bad("end record"))?);
    let mut dir = u64::from(u32_at(bytes, end + 16).ok_or_else(|| bad("end record"))?);
    // Zip64: the locator sits just before the end record and points at the zip64 record.
    if end >= 20 && u32_at(bytes, end - 20) == Some(END64_LOCATOR) {
        let at = u64_at(bytes, end - 12)
            .and_then(offset)
            .ok_or_else(|| bad("zip64 locator"))?;
        if u32_at(bytes, at) != Some(END64) {
            return Err(bad("the zip64 locator points at no zip64 record"));
        }
        count = u64_at(bytes, at + 32).ok_or_else(|| bad("zip64 record"))?;
        dir = u64_at(bytes, at + 48).ok_or_else(|| bad("zip64 record"))?;
    }
    let mut at = offset(dir)
        .filter(|&d| d <= bytes.len())
        .ok_or_else(|| bad("the central directory starts past the end"))?;
    // Each central entry takes at least 46 bytes: a count that cannot fit is a lie.
    if count > (bytes.len() / 46) as u64 {
        return Err(bad("more entries than the file can hold"));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let entry = |what: &str| bad(&format!("central directory entry {i}: {what}"));
        if u32_at(bytes, at) != Some(CENTRAL) {
            return Err(entry("no entry signature"));
        }
        let field = |o: usize| u16_at(bytes, at + o).ok_or_else(|| entry("cut short"));
        let method = field(10)?;
        let name_len = usize::from(field(28)?);
        let extra_len = usize::from(field(30)?);
        let comment_len = usize::from(field(32)?);
        let word = |o: usize| u32_at(bytes, at + o).ok_or_else(|| entry("cut short"));
        let mut compressed = u64::from(word(20)?);
        let mut size = u64::from(word(24)?);
        let mut local = u64::from(word(42)?);
        let name = bytes
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(|| entry("its name runs past the end"))?;
        let name = String::from_utf8_lossy(name).into_owned();
        let extra = bytes
            .get(at + 46 + name_len..at + 46 + name_len + extra_len)
            .ok_or_else(|| entry("its extra field runs past the end"))?;
        // Zip64 extra field (id 1): the 64-bit values of the fields set to 0xffffffff, in order.
        let mut e = 0;
        while e + 4 <= extra.len() {
            let id = u16_at(extra, e).unwrap_or(0);
            let len = usize::from(u16_at(extra, e + 2).unwrap_or(0));
            let body = extra.get(e + 4..e + 4 + len).unwrap_or(&[]);
            if id == 1 {
                let mut k = 0;
                for v in [&mut size, &mut compressed, &mut local] {
                    if *v == u64::from(u32::MAX) {
                        *v = u64_at(body, k).ok_or_else(|| entry("zip64 field cut short"))?;
                        k += 8;
                    }
                }
            }
            e += 4 + len;
        }
        if method != 0 {
            return Err(format!(
                "zip entry {name} is compressed (method {method}); torch.save stores entries \
                 uncompressed"
            ));
        }
        if compressed != size {
            return Err(entry("stored sizes disagree"));
        }
        let local = offset(local).ok_or_else(|| entry("offset"))?;
        if u32_at(bytes, local) != Some(LOCAL) {
            return Err(entry("no local header where the directory points"));
        }
        let local_name = usize::from(u16_at(bytes, local + 26).ok_or_else(|| entry("cut"))?);
        let local_extra = usize::from(u16_at(bytes, local + 28).ok_or_else(|| entry("cut"))?);
        let start = local + 30 + local_name + local_extra;
        let data = offset(size)
            .and_then(|n| bytes.get(start..start.checked_add(n)?))
            .ok_or_else(|| {
                format!(
                    "zip entry {name}: its {size} bytes run past the end of the file (cut short?)"
                )
            })?;
        out.push(Entry { name, data });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}
