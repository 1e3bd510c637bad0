//! JavaScript string length, where OpenCode's caps count it: UTF-16 code units.

/// The longest prefix of `s` of at most `units` UTF-16 code units, or None when `s` fits.
pub(crate) fn utf16_prefix(s: &str, units: usize) -> Option<&str> {
    if s.len() <= units || s.encode_utf16().count() <= units {
        return None;
    }
    let mut used = 0;
    let mut end = 0;
    for (i, ch) in s.char_indices() {
        if used + ch.len_utf16() > units {
            break;
        }
        used += ch.len_utf16();
        end = i + ch.len_utf8();
    }
    Some(&s[..end])
}
