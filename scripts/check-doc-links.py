#!/usr/bin/env python3
"""Checks every relative markdown link (and #anchor) in README.md, docs/*.md and sdk/python/README.md.
Usage: scripts/check-doc-links.py [REPO_ROOT]; exit 1 on a link to a missing file or heading."""
import os, re, sys, glob
root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
files = [os.path.join(root, "README.md"), os.path.join(root, "sdk/python/README.md")] + sorted(glob.glob(os.path.join(root, "docs/*.md")))
def slug(h):
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)   # GitHub: drop punctuation except - and _
    return h.replace(" ", "-")
def anchors(path):
    out, seen = set(), {}
    incode = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"): incode = not incode
        if incode: continue
        m = re.match(r"^(#{1,6})\s+(.*)", line)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0); seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out
bad = 0
for f in files:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target): continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(dest):
            if os.path.basename(dest) == "CONFIG.md":
                continue  # generated (docs/CONFIG.md); not checked while absent
            print(f"{os.path.relpath(f, root)}: missing {target}"); bad += 1; continue
        if frag and dest.endswith(".md") and frag not in anchors(dest):
            print(f"{os.path.relpath(f, root)}: no anchor #{frag} in {os.path.relpath(dest, root)}"); bad += 1
print(f"{len(files)} files checked, {bad} bad links")
sys.exit(1 if bad else 0)
