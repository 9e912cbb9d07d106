"""MkDocs hooks for the CLI reference (mkdocs.yml ``hooks:``): how mkdocs-click renders
hotshard's click commands.

Two things mkdocs-click 0.9.0 (pinned in constraints.txt) gets wrong for these commands:

- A command's help keeps click's ``\\b`` paragraphs (the "Examples:" block, exit statuses) as
  indented lines, which Markdown joins into one run-on paragraph. Here each such paragraph
  becomes a ``text`` block, as ``hotshard CMD --help`` lays it out.
- click >= 8.3 marks an option without a default with a sentinel, which the option table
  prints as ``Sentinel.UNSET`` in its Default column. Here that cell is left empty.

``tests/test_docs_examples.py`` builds the site and checks both.
"""

from __future__ import annotations

import inspect
import re

import mkdocs_click._docs as click_docs

_NO_WRAP = "\b"


def _help_as_markdown(help_text: str) -> list[str]:
    """The help text's lines, each ``\\b`` paragraph fenced as text, the rest as written."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", inspect.cleandoc(help_text)):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == _NO_WRAP:
            out += ["```text", *[line for line in lines[1:]], "```", ""]
        else:
            out += [*lines, ""]
    return out


def _make_description(ctx, remove_ascii_art: bool = False):
    help_text = ctx.command.help or ctx.command.short_help
    if help_text:
        yield from _help_as_markdown(help_text)


def on_startup(command, dirty) -> None:
    if not hasattr(click_docs, "_make_description"):
        raise RuntimeError("mkdocs-click changed: tools/docs_hooks.py needs a look")
    click_docs._make_description = _make_description


def on_page_content(html, page, config, files):
    return html.replace("<code>Sentinel.UNSET</code>", "")
