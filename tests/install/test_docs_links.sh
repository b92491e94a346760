# The user's pages link to each other and to files of the repository: every
# relative link in README.md and docs/*.md must name a file or folder that
# exists, and a #fragment must name a heading of its page, spelled as
# GitHub makes anchors (lower case, punctuation dropped, spaces as hyphens,
# a repeated heading's anchor numbered -1, -2, ...). Pages are moved and
# headings renamed; this catches the links left behind.
#   test_docs_links.sh SOURCE_DIR
set -euo pipefail
cd "$1"
python3 - README.md docs/*.md <<'PY'
import os, re, sys

def anchors(path):
    found, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text
        slug = re.sub(r"[^\w\- ]", "", text.lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found

def prose(path):
    """The page with fenced blocks and inline code blanked, lines kept."""
    out, fence = [], False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("\n")
        else:
            out.append("\n" if fence else re.sub(r"`[^`\n]*`", "``", line))
    return "".join(out)

link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # link text may wrap lines
errors = checked = 0
for page in sys.argv[1:]:
    text = prose(page)
    for m in link.finditer(text):
        target, no = m.group(1), text.count("\n", 0, m.start(1)) + 1
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        checked += 1
        if not os.path.exists(dest):
            print(f"FAIL: {page}:{no}: {target}: no file {dest}")
            errors += 1
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            print(f"FAIL: {page}:{no}: {target}: no heading #{frag} in {dest}")
            errors += 1
if checked == 0:
    print("FAIL: no relative links found: the pattern is broken")
    errors += 1
print(f"{checked} links checked, {errors} broken")
sys.exit(1 if errors else 0)
PY
