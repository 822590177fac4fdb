"""Counterbalanced condition orders (balanced Latin squares, Williams 1949)."""

from __future__ import annotations

from collections.abc import Sequence


def balanced_latin_square(n: int) -> list[list[int]]:
    """Rows of a Williams design for ``n`` conditions.

    Every condition appears once in every position across the rows, and (first-order
    carry-over balance) every condition immediately follows every other one equally
    often. For even ``n`` that takes ``n`` rows; for odd ``n`` the square and its
    mirror image are needed, ``2 n`` rows.

    Args:
        n: number of conditions (>= 1).

    Returns:
        The rows, each a permutation of ``range(n)``.
    """
    if n < 1:
        raise ValueError(f"a Latin square needs at least one condition, got {n}")
    first: list[int] = []
    low, high = 0, n - 1
    for position in range(n):
        if position % 2 == 0:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(value + shift) % n for value in first] for shift in range(n)]
    if n % 2 == 1:
        rows += [list(reversed(row)) for row in rows]
    return rows


def square_rows(n: int) -> int:
    """How many rows :func:`balanced_latin_square` has for ``n`` conditions (``n`` when
    even, ``2 n`` when odd): participant ``i`` takes row ``i`` modulo this."""
    if n < 1:
        raise ValueError(f"a Latin square needs at least one condition, got {n}")
    return n if n % 2 == 0 else 2 * n


def condition_order(conditions: Sequence[str], participant_index: int) -> list[str]:
    """The order in which participant number ``participant_index`` meets the conditions."""
    rows = balanced_latin_square(len(conditions))
    row = rows[participant_index % len(rows)]
    return [conditions[i] for i in row]
