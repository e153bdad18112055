"""Tables for the terminal that fit: one light style for every table coderun prints, columns that never cut a
value, and layouts chosen by the width there is.

A value column (`cols(..., keep=...)`, the default) is as wide as its widest cell: rich may fold a header, never
a number or a name. A text column (`fold`) may fold onto several lines when the terminal is narrow, whole (no
'…'). `Fit` picks the first of several layouts (widest first) that fits the console; `print_wide` prints a
renderable at its natural width, for `--wide`.

A report renderer (see coderun/report/render.py): it builds tables and prints only on a console it is given,
so it may import rich; the rest of the library says what happens as events (coderun/events.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

EMPTY = "–"


def new_table(title: str | None = None) -> Table:
    """A borderless table (header rule only, two spaces between columns): 8 columns fit in 80."""
    return Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                 collapse_padding=True, show_edge=False, pad_edge=False, header_style="bold")


def cell_width(cell: Any) -> int:
    text = _text(cell)
    return max((len(line) for line in text.plain.splitlines()), default=0)


def make_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None,
               left: Iterable[int] = (0,), fold: Iterable[int] = (), styles: Sequence[str | None] = ()) -> Table:
    """A table whose columns in `fold` may fold (long paths, lists of names) and whose other columns are kept
    whole: right-aligned numbers, except the `left` ones (names)."""
    left, fold = set(left), set(fold)
    t = new_table(title)
    for i, col in enumerate(header):
        width = max((cell_width(r[i]) for r in rows), default=0)
        t.add_column(col, justify="left" if i in left or i in fold else "right", overflow="fold",
                     no_wrap=i not in fold, min_width=None if i in fold else max(width, 1))
    for n, row in enumerate(rows):
        t.add_row(*row, style=styles[n] if n < len(styles) else None)
    return t


def empty_columns(rows: Sequence[Sequence[Any]], first: int = 1) -> set[int]:
    """Indexes (from `first`) of the columns whose every cell is '–'."""
    if not rows:
        return set()
    return {i for i in range(first, len(rows[0])) if all(str(r[i]) == EMPTY for r in rows)}


def drop_columns(header: Sequence[str], rows: Sequence[Sequence[Any]], drop: set[int]):
    keep = [i for i in range(len(header)) if i not in drop]
    return [header[i] for i in keep], [[r[i] for i in keep] for r in rows]


class Fit:
    """The first layout whose natural width fits the console; the last one when none does."""

    def __init__(self, *layouts: Any) -> None:
        self.layouts = layouts

    def choose(self, console: Console, options: ConsoleOptions) -> Any:
        for layout in self.layouts[:-1]:
            if Measurement.get(console, options.update_width(10_000), layout).maximum <= options.max_width:
                return layout
        return self.layouts[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.choose(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.choose(console, options))


def print_wide(console: Console, renderable: Any) -> None:
    """Print at the renderable's natural width, wider than the terminal if need be (`--wide`): lines longer
    than the terminal wrap there, or read them with `less -S`; no value is cut."""
    natural = Measurement.get(console, console.options.update_width(10_000), renderable).maximum
    # print(width=) can narrow the output, not widen it: a console of that width on the same stream can.
    wide = Console(file=console.file, width=max(console.width, natural), color_system=console.color_system,
                   force_terminal=console.is_terminal, no_color=console.no_color, highlight=False)
    wide.print(renderable)


def table_or_stacked(header: Sequence[str], rows: Sequence[Sequence[Any]], last: str, values: Sequence[str], *,
                     title: str | None = None, left: Iterable[int] = (0,), fold: Iterable[int] = (0,),
                     label: str | None = None) -> Fit:
    """`rows` with a last column `last` when that fits the terminal; else each row's value of it on a dim line
    of its own under the row's first cell (`  label: value`, label defaulting to `last`)."""
    left, fold = set(left), set(fold)
    one = make_table([*header, last], [[*r, v] for r, v in zip(rows, values, strict=True)], title=title,
                     left=left, fold=fold | {len(header)})
    under = [[_text(r[0]) + (Text(f"\n  {label or last}: ", style="dim") + _text(v, "dim") if v else Text()), *r[1:]]
             for r, v in zip(rows, values, strict=True)]
    return Fit(one, make_table(header, under, title=title, left=left, fold=fold | {0}))


def _text(cell: Any, style: str = "") -> Text:
    if isinstance(cell, Text):
        return cell
    text = Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))
    text.stylize(style)
    return text
