#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/**/*.md.

Every markdown link `[text](target)` whose target is not a URL must name a
file or folder that exists (relative to the page), and a `#anchor` on a
markdown page must be one of that page's headings, slugged as GitHub does
(lower case, punctuation dropped, spaces to hyphens, -1, -2 ... for
repeats). Links inside code spans and fenced blocks are not links and are
skipped. Prints each broken link and exits 1 if there is any.

usage: python3 scripts/check-doc-links.py [REPO_ROOT]
"""
import os
import re
import sys

LINK = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]*(?:\([^()]*\)[^()\s]*)*)\)')


def slug(text):
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def strip_code(line):
    return re.sub(r'(`+)(.+?)\1', '', line)


def pages(root):
    out = [os.path.join(root, 'README.md')]
    for folder, _, files in os.walk(os.path.join(root, 'docs')):
        out += [os.path.join(folder, f) for f in sorted(files) if f.endswith('.md')]
    return [p for p in out if os.path.exists(p)]


def anchors(path, cache={}):
    if path not in cache:
        seen, found, fence = {}, set(), False
        with open(path, encoding='utf-8') as f:
            for line in f:
                if line.lstrip().startswith('```'):
                    fence = not fence
                    continue
                m = None if fence else re.match(r'#{1,6} (.*)', line)
                if m:
                    s = slug(m.group(1).replace('`', ''))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    found.add(s if n == 0 else f'{s}-{n}')
        cache[path] = found
    return cache[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), '..'))
    bad = checked = 0
    for page in pages(root):
        fence = False
        with open(page, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                if line.lstrip().startswith('```'):
                    fence = not fence
                    continue
                if fence:
                    continue
                for target in LINK.findall(strip_code(line)):
                    if re.match(r'[a-z][a-z0-9+.-]*:', target):  # http:, mailto:
                        continue
                    checked += 1
                    path, _, anchor = target.partition('#')
                    dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                    where = f'{os.path.relpath(page, root)}:{number}: {target}'
                    if not os.path.exists(dest):
                        print(f'{where}: no such file')
                        bad += 1
                    elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                        print(f'{where}: no heading #{anchor} in {os.path.relpath(dest, root)}')
                        bad += 1
    print(f'{checked} relative links checked, {bad} broken')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
