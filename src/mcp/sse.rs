//! Server-sent events (`text/event-stream`), pure: an incremental reader that turns chunks of
//! bytes into events, and the writer of one event. Both MCP HTTP transports carry messages
//! as the `data` of events.

/// One event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// `event:` (empty means `message`).
    pub event: String,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// `id:`, if the event had one.
    pub id: Option<String>,
    /// `retry:` in milliseconds, if given.
    pub retry: Option<u64>,
}

/// The event stream broke its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge;

/// Reads events from chunks as they arrive.
#[derive(Debug)]
pub struct Reader {
    buffer: Vec<u8>,
    /// Where the next unread line starts in `buffer`.
    start: usize,
    current: Event,
    has_data: bool,
    max_event: usize,
    /// A `\r` ended the previous chunk: a `\n` first in the next one belongs to it.
    after_cr: bool,
    bom_checked: bool,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl Reader {
    /// A reader that refuses events larger than `max_event` bytes.
    pub fn new(max_event: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            current: Event::default(),
            has_data: false,
            max_event,
            after_cr: false,
            bom_checked: false,
            last_id: None,
            retry: None,
        }
    }

    /// Feed `chunk`; every event it completes is pushed to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        self.buffer.extend_from_slice(chunk);
        if !self.bom_checked && self.buffer.len() >= 3 {
            self.bom_checked = true;
            if self.buffer.starts_with(b"\xEF\xBB\xBF") {
                self.start = 3;
            }
        }
        loop {
            let rest = &self.buffer[self.start..];
            let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                break;
            };
            let mut next = self.start + end + 1;
            if rest[end] == b'\r' {
                match self.buffer.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line =
                String::from_utf8_lossy(&self.buffer[self.start..self.start + end]).into_owned();
            self.start = next;
            if let Some(event) = self.line(&line)? {
                out.push(event);
            }
        }
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        if self.buffer.len() + self.current.data.len() > self.max_event {
            return Err(TooLarge);
        }
        Ok(())
    }

    /// The id of the last event seen (with or without data): where a resumed stream picks up.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the server asked for, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    fn line(&mut self, line: &str) -> Result<Option<Event>, TooLarge> {
        if line.is_empty() {
            let mut event = std::mem::take(&mut self.current);
            if let Some(id) = event.id.take() {
                self.last_id = (!id.is_empty()).then_some(id);
            }
            event.id = self.last_id.clone();
            if let Some(retry) = event.retry {
                self.retry = Some(retry);
            }
            // An event with no data line is not dispatched; its id and retry still count.
            return Ok(std::mem::take(&mut self.has_data).then_some(event));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.current.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
                if self.current.data.len() > self.max_event {
                    return Err(TooLarge);
                }
            }
            "id" if !value.contains('\0') => self.current.id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.current.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

/// One event as text: `event:` when not a plain message, `id:` when given, and `data`
/// split on its line breaks (a JSON message has none outside strings, but a reformatted
/// one may).
pub fn encode(event: Option<&str>, id: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    for line in data.split(['\n', '\r']) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        for chunk in chunks {
            reader.feed(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_split_anywhere_and_any_line_ending_are_read_the_same() {
        let text = b"\xEF\xBB\xBF: comment\r\nevent: message\nid: 7\r\ndata: {\"a\":\ndata: 1}\r\rretry: 3000\ndata: x\n\n";
        let whole = read_all(&[text]);
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(read_all(&[a, b]), whole, "cut at {cut}");
        }
        assert_eq!(
            whole,
            vec![
                Event {
                    event: "message".into(),
                    data: "{\"a\":\n1}".into(),
                    id: Some("7".into()),
                    retry: None
                },
                Event {
                    event: String::new(),
                    data: "x".into(),
                    id: Some("7".into()),
                    retry: Some(3000)
                }
            ]
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_but_its_id_and_retry_count() {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        reader
            .feed(b"id: p-0\nretry: 500\n\nevent: x\n\ndata\n\n", &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data, "");
        assert_eq!(out[0].id.as_deref(), Some("p-0"), "the last id carries on");
        assert_eq!(reader.last_id(), Some("p-0"));
        assert_eq!(reader.retry(), Some(500));
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut reader = Reader::new(16);
        let mut out = Vec::new();
        assert_eq!(
            reader.feed(b"data: 0123456789abcdefXYZ", &mut out),
            Err(TooLarge)
        );
        let mut reader = Reader::new(16);
        assert_eq!(
            reader.feed(b"data: 0123456789\ndata: 0123456789\n", &mut out),
            Err(TooLarge)
        );
    }

    #[test]
    fn encoded_events_read_back() {
        let text = encode(Some("message"), Some("s-1"), "{\"a\":\n1}");
        assert_eq!(text, "event: message\nid: s-1\ndata: {\"a\":\ndata: 1}\n\n");
        let events = read_all(&[text.as_bytes()]);
        assert_eq!(events[0].data, "{\"a\":\n1}");
        assert_eq!(events[0].id.as_deref(), Some("s-1"));
    }
}
