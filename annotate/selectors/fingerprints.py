"""Fingerprints of sets of rows and of their stamps, for the cache keys of reports.

A cached report is used while its key is unchanged, so the key must move whenever a counted
number could: a set of rows (the work that counts) summarised by its count and the sum of its
ids, or of their squares, stays the same when ids 1, 5 and 6 stop counting while 2, 3 and 7
start (equal sums of powers: three rejections and three restored submissions between two page
loads). `ids_fingerprint` sums a 32-bit mix of each id instead (two lanes): no arithmetic
relation among the ids carries over to their hashes, so such a swap moves the sums but for a
chance of about one in 2**64.

A stamp taken from a web or worker host's clock (`changed_at`, `kind_changed_at`) can be older
than one written before it when the hosts' clocks disagree, so its maximum may not move:
`stamps_sum` sums every stamp instead (count it beside), which any new stamp moves.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import BigIntegerField, Expression, F, Func, QuerySet, Sum

_MASK = 0xFFFFFFFF
# Odd multipliers below 2**31, so a 32-bit value times one fits a signed 64-bit integer
# (PostgreSQL's bigint raises on overflow, SQLite's turns into a float).
# Each lane: a constant folded into the id first, the shifts of its three steps, its two
# multipliers.
_LANES = (
    (0, (16, 15, 16), (0x7FEB352D, 0x5BD1E995)),
    (0x1B873593, (15, 13, 16), (0x2C1B3C6D, 0x27D4EB2F)),
)
# Stamps in (micro- or milli)seconds modulo a prime, so their sum over millions of rows still
# fits SQLite's integers (SUM raises "integer overflow" there).
_STAMP_PRIME = 2_147_483_647


def _xor(a: str, b: str) -> str:
    # SQLite has no XOR operator; (a | b) - (a & b) is the same on both databases.
    return f"((({a}) | ({b})) - (({a}) & ({b})))"


def _xorshift_times(column: str, shift: int, multiplier: int) -> str:
    return f"((({_xor(column, f'{column} >> {shift}')}) * {multiplier}) & {_MASK})"


def _fence() -> str:
    """End a subquery so the planner keeps it as it is: pulled up, each reference to its
    column would repeat the whole expression under it (four per step of the mix)."""
    return " LIMIT -1 OFFSET 0" if connection.vendor == "sqlite" else " OFFSET 0"


def ids_fingerprint(queryset: QuerySet, key: str = "pk") -> tuple[int, int, int]:
    """Return (rows, sum of hash A, sum of hash B) over the integer `key` of each row.

    Each key is hashed by two 32-bit xorshift-multiply mixes of their own (`_LANES`: other
    multipliers, shifts and a constant folded in first; each a bijection of 32-bit values, so
    two ids below 2**32 never share a hash in a lane; larger ids are taken modulo 2**32): the
    rows' order does not matter, and two different sets share the three numbers only by chance
    (about one in 2**64, taking the mixes for independent random functions), whatever
    arithmetic relation their ids have. Lane B must not be a function of lane A's hash alone:
    one that multiplied it again (`(h * c) mod 2**32`) summed to c times lane A's sum modulo
    2**32, so a collision of lane A was one of lane B nearly always (about one in 2**33).
    Computed by the database in one statement.
    """
    sql, params = queryset.order_by().values(key).query.sql_with_params()
    fence = _fence()
    lanes = list(enumerate(_LANES))
    start = ", ".join(
        f"{_xorshift_times(_xor('x', str(seed)), shifts[0], multipliers[0])} AS a{lane}"
        for lane, (seed, shifts, multipliers) in lanes
    )
    mixed = f"SELECT {start} FROM (SELECT ({key} & {_MASK}) AS x FROM ({sql}) keyed) masked{fence}"
    step = ", ".join(
        f"{_xorshift_times(f'a{lane}', shifts[1], multipliers[1])} AS b{lane}"
        for lane, (_, shifts, multipliers) in lanes
    )
    mixed = f"SELECT {step} FROM ({mixed}) once{fence}"
    last = ", ".join(
        f"{_xor(f'b{lane}', f'b{lane} >> {shifts[2]}')} AS h{lane}"
        for lane, (_, shifts, _) in lanes
    )
    mixed = f"SELECT {last} FROM ({mixed}) twice{fence}"
    statement = f"SELECT COUNT(*), SUM(h0), SUM(h1) FROM ({mixed}) hashed"
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        rows, lane_a, lane_b = cursor.fetchone()
    return (rows, int(lane_a or 0), int(lane_b or 0))


class _StampNumber(Func):
    """A datetime as a whole number: microseconds since 1970 on PostgreSQL, milliseconds on
    SQLite (its date functions keep no finer part)."""

    output_field = BigIntegerField()

    def as_postgresql(self, compiler, connection, **extra):
        template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) * 1000000 AS BIGINT)"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler, connection, **extra):
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400000) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)


def stamps_sum(field: str) -> Expression:
    """An aggregate: the sum of every non-null stamp of `field` (each modulo a prime). Count the
    stamps beside it: a first stamp moves the count, a later one, older or newer, the sum (but
    for one moved by an exact multiple of the prime: 36 minutes to the microsecond on
    PostgreSQL, 25 days to the millisecond on SQLite)."""
    return Sum(_StampNumber(F(field)) % _STAMP_PRIME)
