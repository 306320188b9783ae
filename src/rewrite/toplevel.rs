//! Sparse parsing: most of an 80 KB FlashInfer module is code no rule looks at, and ruff's
//! parser spends most of the rewrite building and freeing that code's tree. This scanner cuts
//! the source into top-level statements without parsing them, so that only the statements
//! mentioning a name the rules care about are handed to the parser, the others blanked out in
//! place (same bytes offsets, same lines).
//!
//! The scanner follows ruff's lexer (which follows CPython's) wherever it decides where a
//! string, a comment, a bracket or a logical line ends: a statement boundary it got wrong could
//! hide code from the parser or show it text from inside a string. Anything it is not sure of
//! returns `None`, and the caller parses the whole source instead.

/// What the parser needs to see.
#[derive(Debug, PartialEq, Eq)]
pub enum Sparse {
    /// No statement mentions a relevant name: there is nothing to parse.
    Nothing,
    /// The source with every unselected statement blanked: each line a comment of the same
    /// length (`#` and spaces, line breaks kept), so offsets and line numbers are those of the
    /// original.
    Source(String),
}

/// Strings nested in f-string fields nested in strings...: past this the scanner gives up
/// rather than recurse further on hostile input.
const MAX_NESTING: usize = 200;
const BOM: &[u8] = "\u{feff}".as_bytes();

/// Selects the top-level statements of `source` that use one of `names` as an identifier
/// (anywhere in them, f-string fields included), or any non-ASCII identifier (ruff
/// NFKC-normalises those, so it could spell a relevant name). With `definitions_only`, only
/// the `def`s of those names (decorated or not) and the `from` imports using them: no other
/// statement produces `Facts::functions` or `Facts::imports` about them. `None` when the
/// scanner is unsure of the statement boundaries.
pub fn sparse(source: &str, names: &[&str], definitions_only: bool) -> Option<Sparse> {
    let mut scan = Scan {
        b: source.as_bytes(),
        i: 0,
        segments: Vec::new(),
        names,
        definitions_only,
    };
    scan.module().ok()?;
    let segments = scan.segments;
    if !segments.iter().any(|s| s.selected) {
        return Some(Sparse::Nothing);
    }
    let mut out = source.as_bytes().to_vec();
    let mut cursor = 0;
    for (k, s) in segments.iter().enumerate() {
        let end = segments.get(k + 1).map_or(out.len(), |n| n.start);
        if s.selected {
            blank(out.get_mut(cursor..s.start)?);
            cursor = end;
        }
    }
    blank(out.get_mut(cursor..)?);
    // Whole characters were replaced by ASCII, so this cannot fail; if it did, parse it all.
    String::from_utf8(out).ok().map(Sparse::Source)
}

/// Blanks whole lines (every region starts at a line start: segments do, and the first one
/// takes a byte-order mark with it). Each non-empty line becomes `#` and spaces rather than
/// all spaces: ruff's lexer skips a comment with one `memchr` but walks indentation byte by
/// byte, and comments between top-level statements mean nothing to the parser.
fn blank(text: &mut [u8]) {
    // Line breaks are `\n` or `\r\n`: the scanner doubts a bare `\r`.
    for line in text.split_mut(|&b| b == b'\n') {
        let body = match line.split_last_mut() {
            Some((b'\r', body)) => body,
            _ => line,
        };
        if let Some((first, rest)) = body.split_first_mut() {
            *first = b'#';
            rest.fill(b' ');
        }
    }
}

/// Bytes that never start or end anything the scanner tracks (`:` is missing: it starts a
/// format spec in a field).
fn is_plain(c: u8) -> bool {
    CLASS[usize::from(c)] == PLAIN
}

fn is_word_byte(c: u8) -> bool {
    CLASS[usize::from(c)] == WORD
}

const WORD: u8 = 1;
const PLAIN: u8 = 2;
/// `is_word_byte` and `is_plain` as one table: they run on every byte.
static CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        class[c] = if word_byte(b) {
            WORD
        } else if plain_byte(b) {
            PLAIN
        } else {
            0
        };
        c += 1;
    }
    class
};

const fn plain_byte(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t'
            | b'\x0c'
            | b'='
            | b'+'
            | b'-'
            | b'*'
            | b'/'
            | b'%'
            | b'<'
            | b'>'
            | b'!'
            | b'.'
            | b','
            | b';'
            | b'&'
            | b'|'
            | b'^'
            | b'~'
            | b'@'
    )
}

const fn word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

struct Segment {
    /// The first byte of its first line.
    start: usize,
    selected: bool,
    /// A decorator: the next statement belongs to it.
    glue_next: bool,
    /// A `from` import: with `definitions_only`, the one kind of statement selected by the
    /// names it mentions rather than by its first line.
    from_import: bool,
}

/// The scanner is unsure; the caller parses everything.
struct Doubt;

type Step = Result<(), Doubt>;

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    segments: Vec<Segment>,
    names: &'a [&'a str],
    definitions_only: bool,
}

impl Scan<'_> {
    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn module(&mut self) -> Step {
        // ruff skips a byte-order mark at offset 0 only.
        if self.b.starts_with(BOM) {
            self.i = BOM.len();
        }
        let mut brackets = Vec::new();
        let mut line_start = true;
        while self.i <= self.b.len() {
            if line_start {
                line_start = false;
                self.line_start()?;
            }
            let Some(c) = self.at(0) else { break };
            match c {
                b'\n' | b'\r' => {
                    self.newline()?;
                    line_start = brackets.is_empty();
                }
                _ => self.code(c, &mut brackets, 0)?,
            }
        }
        if brackets.is_empty() {
            Ok(())
        } else {
            Err(Doubt)
        }
    }

    /// At the first byte of a physical line that begins a logical line at depth 0: a new
    /// statement, a continuation of the current one (indented, or `else` and kin), or nothing.
    fn line_start(&mut self) -> Step {
        let rest = self.b.get(self.i..).unwrap_or(&[]);
        let Some(&first) = rest.first() else {
            return Ok(());
        };
        match first {
            b'\n' | b'\r' | b'#' => Ok(()),
            // A continuation at the start of a line: legal, and never in FlashInfer.
            b'\\' => Err(Doubt),
            b' ' | b'\t' | b'\x0c' => {
                let indent = rest
                    .iter()
                    .position(|&c| !matches!(c, b' ' | b'\t' | b'\x0c'))
                    .unwrap_or(rest.len());
                match rest.get(indent) {
                    None | Some(b'\n' | b'\r' | b'#') => Ok(()),
                    Some(b'\\') => Err(Doubt),
                    // A form feed resets ruff's column: the line may be a top-level statement.
                    Some(_) if rest.get(..indent).is_some_and(|i| i.contains(&b'\x0c')) => {
                        Err(Doubt)
                    }
                    // An indented line belongs to the statement above it.
                    Some(_) if self.segments.is_empty() => Err(Doubt),
                    Some(_) => Ok(()),
                }
            }
            _ => {
                let decorator = first == b'@';
                // Over-matching (`elsewhere = 1`) only glues two statements together.
                let clause = [&b"else"[..], b"elif", b"except", b"finally"]
                    .iter()
                    .any(|k| rest.starts_with(k));
                let names_relevant_def = self.definitions_only && self.defines_relevant(rest);
                let from_import = starts_with_keyword(rest, b"from");
                match self.segments.last_mut() {
                    Some(last) if last.glue_next || clause => {
                        last.glue_next = decorator;
                        last.selected |= names_relevant_def;
                    }
                    _ => self.segments.push(Segment {
                        // A byte-order mark belongs to the first line, blanked or kept with it.
                        start: if self.i == BOM.len() && self.b.starts_with(BOM) {
                            0
                        } else {
                            self.i
                        },
                        selected: names_relevant_def,
                        glue_next: decorator,
                        from_import,
                    }),
                }
                Ok(())
            }
        }
    }

    /// Whether `line` is a `def` (or `async def`) of a relevant name; true when in doubt.
    fn defines_relevant(&self, line: &[u8]) -> bool {
        let skip_blanks = |l: &[u8]| -> usize {
            l.iter()
                .position(|&c| c != b' ' && c != b'\t')
                .unwrap_or(l.len())
        };
        let mut rest = line;
        if starts_with_keyword(rest, b"async") {
            rest = rest.get(5..).unwrap_or(&[]);
            let blanks = skip_blanks(rest);
            if blanks == 0 {
                return true;
            }
            rest = rest.get(blanks..).unwrap_or(&[]);
        }
        if !starts_with_keyword(rest, b"def") {
            return false;
        }
        rest = rest.get(3..).unwrap_or(&[]);
        let blanks = skip_blanks(rest);
        rest = rest.get(blanks..).unwrap_or(&[]);
        let len = rest
            .iter()
            .position(|&c| !is_word_byte(c))
            .unwrap_or(rest.len());
        let name = rest.get(..len).unwrap_or(&[]);
        // No plain name right after `def` (a continuation line, say): select.
        blanks == 0
            || name.is_empty()
            || !name.is_ascii()
            || self.names.iter().any(|n| n.as_bytes() == name)
    }

    /// Past a line break; a bare `\r` (a line break to Python) is a doubt, so that blanking
    /// can treat lines as ending in `\n`.
    fn newline(&mut self) -> Step {
        match (self.at(0), self.at(1)) {
            (Some(b'\r'), Some(b'\n')) => self.i += 2,
            (Some(b'\r'), _) => return Err(Doubt),
            _ => self.i += 1,
        }
        Ok(())
    }

    /// One token (or one byte of one) of code outside any string, `c` being `self.at(0)`;
    /// newlines are the caller's.
    fn code(&mut self, c: u8, brackets: &mut Vec<u8>, nesting: usize) -> Step {
        match c {
            b'#' => self.skip_until(|c| c == b'\n' || c == b'\r'),
            b'\\' => {
                self.i += 1;
                match self.at(0) {
                    Some(b'\n' | b'\r') => self.newline()?,
                    _ => return Err(Doubt),
                }
                if self.at(0).is_none() {
                    return Err(Doubt);
                }
            }
            b'(' | b'[' | b'{' => {
                brackets.push(c);
                self.i += 1;
            }
            b')' | b']' | b'}' => {
                let open = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if brackets.pop() != Some(open) {
                    return Err(Doubt);
                }
                self.i += 1;
            }
            b'"' | b'\'' => self.string(None, nesting)?,
            b'0'..=b'9' => {
                self.eat_word();
                // `1if x else y` is fine, but `1f"..."` lexes as a number and an f-string:
                // not worth modelling.
                if matches!(self.at(0), Some(b'"' | b'\'')) {
                    return Err(Doubt);
                }
            }
            c if is_word_byte(c) => {
                let start = self.i;
                let ascii = self.eat_word();
                let bytes = self.b;
                let word = bytes.get(start..self.i).unwrap_or(&[]);
                if !ascii || self.names.iter().any(|n| n.as_bytes() == word) {
                    let definitions_only = self.definitions_only;
                    if let Some(s) = self.segments.last_mut() {
                        s.selected |= s.from_import || !definitions_only;
                    }
                }
                if matches!(self.at(0), Some(b'"' | b'\'')) {
                    if let Some(interpolated) = prefix(word) {
                        self.string(Some(interpolated), nesting)?;
                    }
                }
            }
            _ => {
                self.i += 1;
                self.skip_until(|c| !is_plain(c));
            }
        }
        Ok(())
    }

    /// Consumes identifier (or number) bytes; whether they were all ASCII.
    fn eat_word(&mut self) -> bool {
        let rest = self.b.get(self.i..).unwrap_or(&[]);
        let len = rest
            .iter()
            .position(|&c| !is_word_byte(c))
            .unwrap_or(rest.len());
        let ascii = rest.get(..len).is_some_and(|w| w.is_ascii());
        self.i += len;
        ascii
    }

    /// Moves to the next byte matching `stop`, or to the end.
    fn skip_until(&mut self, stop: impl Fn(u8) -> bool) {
        let rest = self.b.get(self.i..).unwrap_or(&[]);
        self.i += rest.iter().position(|&c| stop(c)).unwrap_or(rest.len());
    }

    /// A string starting at the quote under the cursor. `interpolated` is `Some(raw)` for f-
    /// and t-strings.
    fn string(&mut self, interpolated: Option<bool>, nesting: usize) -> Step {
        if nesting > MAX_NESTING {
            return Err(Doubt);
        }
        let q = self.at(0).ok_or(Doubt)?;
        let triple = self.at(1) == Some(q) && self.at(2) == Some(q);
        self.i += if triple { 3 } else { 1 };
        if let Some(raw) = interpolated {
            return self.literal(q, triple, raw, false, nesting + 1);
        }
        // Raw or not, a backslash keeps the next character from ending the string.
        loop {
            self.skip_until(|c| c == q || c == b'\\' || c == b'\n' || c == b'\r');
            let c = self.at(0).ok_or(Doubt)?;
            match c {
                b'\\' => {
                    self.i += 1;
                    if self.at(0).is_none() {
                        return Err(Doubt);
                    }
                    self.newline_or_byte()?;
                }
                b'\n' | b'\r' if !triple => return Err(Doubt),
                c if c == q => {
                    if !triple {
                        self.i += 1;
                        return Ok(());
                    }
                    if self.at(1) == Some(q) && self.at(2) == Some(q) {
                        self.i += 3;
                        return Ok(());
                    }
                    self.i += 1;
                }
                _ => self.i += 1,
            }
        }
    }

    /// Skips one escaped character; `\r\n` counts as one.
    fn newline_or_byte(&mut self) -> Step {
        match self.at(0) {
            Some(b'\r') => self.newline(),
            _ => {
                self.i += 1;
                Ok(())
            }
        }
    }

    /// The literal text of an f-/t-string (or of a format spec, which ends at its `}` and
    /// where `{{` and `}}` are not escapes), up to and including what closes it.
    fn literal(&mut self, q: u8, triple: bool, raw: bool, in_spec: bool, nesting: usize) -> Step {
        let mut named_unicode = false;
        loop {
            self.skip_until(|c| matches!(c, b'\n' | b'\r' | b'\\' | b'{' | b'}' | b'"' | b'\''));
            let c = self.at(0).ok_or(Doubt)?;
            match c {
                b'\n' | b'\r' if !triple => return Err(Doubt),
                b'\\' => {
                    self.i += 1;
                    match self.at(0) {
                        // Still a field delimiter, handled on the next turn.
                        Some(b'{' | b'}') => {}
                        Some(b'N') if !raw && self.at(1) == Some(b'{') => {
                            self.i += 2;
                            named_unicode = true;
                        }
                        Some(_) => self.newline_or_byte()?,
                        None => return Err(Doubt),
                    }
                }
                c if c == q => {
                    let closes = !triple || (self.at(1) == Some(q) && self.at(2) == Some(q));
                    if !closes {
                        self.i += 1;
                        continue;
                    }
                    // A format spec cut short by the end of the string.
                    if in_spec {
                        return Err(Doubt);
                    }
                    self.i += if triple { 3 } else { 1 };
                    return Ok(());
                }
                b'{' => {
                    if !in_spec && self.at(1) == Some(b'{') {
                        self.i += 2;
                    } else {
                        self.i += 1;
                        named_unicode = false;
                        self.field(q, triple, raw, nesting + 1)?;
                    }
                }
                b'}' => {
                    if named_unicode {
                        named_unicode = false;
                        self.i += 1;
                    } else if in_spec {
                        self.i += 1;
                        return Ok(());
                    } else if self.at(1) == Some(b'}') {
                        self.i += 2;
                    } else {
                        return Err(Doubt);
                    }
                }
                _ => self.i += 1,
            }
        }
    }

    /// A replacement field after its `{`: code up to its `}`, or up to a `:` that starts a
    /// format spec (which then ends the field).
    fn field(&mut self, q: u8, triple: bool, raw: bool, nesting: usize) -> Step {
        if nesting > MAX_NESTING {
            return Err(Doubt);
        }
        let mut brackets = Vec::new();
        loop {
            let c = self.at(0).ok_or(Doubt)?;
            match c {
                b'}' if brackets.is_empty() => {
                    self.i += 1;
                    return Ok(());
                }
                b':' if brackets.is_empty() => {
                    self.i += 1;
                    return self.literal(q, triple, raw, true, nesting + 1);
                }
                // Inside a field, as inside brackets, a newline ends no statement.
                b'\n' | b'\r' => self.newline()?,
                _ => self.code(c, &mut brackets, nesting + 1)?,
            }
        }
    }
}

fn starts_with_keyword(line: &[u8], keyword: &[u8]) -> bool {
    line.starts_with(keyword) && !line.get(keyword.len()).is_some_and(|&c| is_word_byte(c))
}

/// Whether `word` followed by a quote starts a string with a prefix, and which kind: `Some(raw)`
/// for f-/t-strings, `None` for the others (whose end does not depend on their prefix).
/// Returns `None` for a plain name too: the quote then starts a string of its own.
fn prefix(word: &[u8]) -> Option<bool> {
    let lower: Vec<u8> = word.iter().map(u8::to_ascii_lowercase).collect();
    match lower.as_slice() {
        b"f" | b"t" => Some(false),
        b"rf" | b"fr" | b"rt" | b"tr" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
