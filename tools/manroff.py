"""What gen_man.py and gen_man3.py share: text made safe for roff."""


def roff(text):
    """Escape text for roff lines: backslashes, hyphens (so they stay
    hyphens, not hyphenation points), and a leading . or '."""
    lines = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)
