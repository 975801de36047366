#!/usr/bin/python3
"""Checks what headless Chromium made of a page of `--html` (tests/html_browser.sh): the DOM it
dumped holds the page's plots and tables, and its screenshot (PNG) shows the plots' colours.

  html_browser_check.py sweep|diagnose DOM_HTML SCREENSHOT_PNG

Exit 0, or 1 naming what is missing.
"""
import html.parser
import struct
import sys
import zlib

# Per page: elements by (tag, class) the DOM must hold at least this many of, and colours of the
# page's style sheet (html_page.cc) its screenshot must show at least this many pixels of.
EXPECTED = {
    "sweep": ({("svg", "hang-probability"): 1, ("svg", "time-to-hang"): 1, ("svg", "stream-breaks"): 1,
               ("tr", "combination"): 2, ("circle", "dot"): 40, ("polyline", "ecdf"): 1},
              {"estimate/interval blue": (31, 95, 168)}),
    "diagnose": ({("svg", "timeline"): 1, ("rect", "stuck"): 1, ("rect", "missing"): 1, ("pre", "report"): 1},
                 {"stuck red": (200, 50, 45), "missing pale red": (244, 215, 213)}),
}


def fail(message):
    print(f"html_browser_check: {message}", file=sys.stderr)
    sys.exit(1)


class Counter(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.counts = {}

    def handle_starttag(self, tag, attrs):
        for css_class in (dict(attrs).get("class") or "").split():
            self.counts[(tag, css_class)] = self.counts.get((tag, css_class), 0) + 1

    handle_startendtag = handle_starttag


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = header[0], header[1], header[2], header[3]
    if depth != 8 or colour not in (2, 6):
        fail(f"{path}: PNG of depth {depth}, colour type {colour}: not read here")
    channels = 3 if colour == 2 else 4
    raw, stride, previous, rows = zlib.decompress(idat), width * channels, bytearray(width * channels), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            predictor = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(kind)
            if predictor is None:  # Paeth
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + predictor) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in EXPECTED:
        fail(__doc__)
    elements, colours = EXPECTED[sys.argv[1]]
    counter = Counter()
    with open(sys.argv[2], encoding="utf-8") as f:
        counter.feed(f.read())
    for key, least in elements.items():
        if counter.counts.get(key, 0) < least:
            fail(f"the DOM holds {counter.counts.get(key, 0)} <{key[0]} class={key[1]}>, expected {least} or more")
    _, _, rows = png_pixels(sys.argv[3])
    for name, rgb in colours.items():
        seen = sum(1 for row in rows for pixel in row if all(abs(p - q) <= 6 for p, q in zip(pixel, rgb)))
        if seen < 50:
            fail(f"the screenshot shows {seen} pixels of {name} {rgb}: the plot is not rendered")


if __name__ == "__main__":
    main()
