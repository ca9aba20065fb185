//! Error text for people: libtorch's C++ exceptions carry a backtrace of C++ frames
//! ("Exception raised from … frame #0: …") after their message; users need the message.

/// `text` without libtorch's C++ backtrace lines.
pub fn without_cpp_frames(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("Exception raised from") || t.starts_with("frame #") {
            break;
        }
        out.push(line);
    }
    let joined = out.join("\n");
    let trimmed = joined.trim_end();
    if trimmed.is_empty() {
        text.lines().next().unwrap_or("").to_string()
    } else {
        trimmed.to_string()
    }
}

/// An error and its causes on one line, `a: b: c`, without C++ frames.
pub fn first_lines(err: &anyhow::Error) -> String {
    err.chain().map(|c| without_cpp_frames(&c.to_string()).replace('\n', " ")).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_frames_are_dropped_and_the_message_kept() {
        let text = "PytorchStreamReader failed reading zip archive: failed finding central directory\nException raised from valid at ../caffe2/serialize/inline_container.cc:236 (most recent call first):\nframe #0: c10::Error::Error(...) + 0x9c (0x7f in libc10.so)\nframe #1: ...";
        assert_eq!(
            without_cpp_frames(text),
            "PytorchStreamReader failed reading zip archive: failed finding central directory"
        );
        assert_eq!(without_cpp_frames("plain"), "plain");
    }
}
