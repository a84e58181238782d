"""The emulator's directory tier (``harness.sim.tiers.DirTier``) on real files: room is made when a
store is submitted, as LMCache's local-disk ``submit_put_task`` does, not when its write lands, and
the chunk evicted is the least recently used, as in LMCache's LRU."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sim import directio
from harness.sim.chunkcrc import with_crc
from harness.sim.tiers import DirTier

CHUNK = directio.aligned_size(64 * 1024)


def _data(d: bytes) -> bytes:
    return with_crc(directio.chunk_payload(d, CHUNK))


def _tier(tmp_path: Path, chunks: int) -> DirTier:
    return DirTier("local_disk", str(tmp_path / "disk"), chunks * CHUNK, index_in_memory=True)


def test_a_store_evicts_when_it_is_submitted_not_when_its_write_lands(tmp_path: Path) -> None:
    tier = _tier(tmp_path, 3)
    old = [bytes([i]) * 32 for i in range(3)]
    for d in old:
        assert tier.write(d, _data(d)) == (True, 0)
    new = bytes([9]) * 32
    assert tier.admit(new, CHUNK) == (True, 1)
    # the oldest is gone at once; the new chunk is not a hit before its file is written
    assert [tier.exists(d) for d in old] == [False, True, True] and not tier.exists(new)
    assert tier.admit(new, CHUNK) == (False, 0)  # already submitted: not twice
    assert tier.write(new, _data(new)) == (True, 0) and tier.exists(new)
    assert len(list((tmp_path / "disk").iterdir())) == 3


def test_a_cyclic_working_set_past_the_size_finds_nothing_however_far_behind_the_writes_are(
        tmp_path: Path) -> None:
    # The scenario that gave the demo cliff disk hits LRU never gives: the measured pass's stores
    # were submitted but their writes had not landed, so chunks LMCache had already dropped were
    # still on disk when the pass came round to them.
    tier = _tier(tmp_path, 4)
    cycle = [bytes([i]) * 32 for i in range(6)]
    for d in cycle:  # the populate pass: the last 4 stay
        tier.write(d, _data(d))
    hits, refused = 0, []
    for d in cycle:  # the measured pass: each miss submits its store; no write lands meanwhile
        hits += tier.exists(d)
        try:
            tier.admit(d, CHUNK)
        except OSError:
            refused.append(d)
    assert hits == 0
    # four stores in flight fill the tier: LMCache skips the next ones, with nothing left to evict
    assert refused == cycle[4:]
    assert [tier.write(d, _data(d))[0] for d in cycle] == [True] * 4 + [False] * 2
    assert sorted(f.name for f in (tmp_path / "disk").iterdir()) == sorted(tier.path(d).rsplit("/", 1)[1]
                                                                            for d in cycle[:4])


def test_a_write_not_admitted_first_still_makes_its_room(tmp_path: Path) -> None:
    tier = _tier(tmp_path, 2)
    chunks = [bytes([i]) * 32 for i in range(3)]
    assert [tier.write(d, _data(d))[1] for d in chunks] == [0, 0, 1]
    assert [tier.exists(d) for d in chunks] == [False, True, True]


def test_a_hit_keeps_its_chunk_and_the_one_left_unread_is_evicted(tmp_path: Path) -> None:
    # Evicting by write time (FIFO) is kinder than LMCache here: after A, B, a hit on A and a store
    # of C, LMCache's LRU has dropped B, and FIFO would still serve it while dropping A.
    tier = _tier(tmp_path, 2)
    a, b, c = (bytes([i]) * 32 for i in (1, 2, 3))
    tier.write(a, _data(a))
    tier.write(b, _data(b))
    assert tier.read(a)[0] > 0
    assert tier.admit(c, CHUNK) == (True, 1)
    assert (tier.exists(a), tier.exists(b)) == (True, False)
    tier.write(c, _data(c))
    assert (tier.exists(a), tier.exists(b), tier.exists(c)) == (True, False, True)


def test_a_store_of_a_chunk_on_disk_makes_it_the_most_recently_used(tmp_path: Path) -> None:
    tier = _tier(tmp_path, 2)
    a, b, c = (bytes([i]) * 32 for i in (1, 2, 3))
    tier.write(a, _data(a))
    tier.write(b, _data(b))
    assert tier.admit(a, CHUNK) == (False, 0)  # present: not written again, but refreshed
    assert tier.admit(c, CHUNK) == (True, 1)
    assert (tier.exists(a), tier.exists(b)) == (True, False)


def test_a_read_that_misses_refreshes_nothing(tmp_path: Path) -> None:
    tier = _tier(tmp_path, 2)
    a, b, c = (bytes([i]) * 32 for i in (1, 2, 3))
    tier.write(a, _data(a))
    tier.write(b, _data(b))
    with pytest.raises(FileNotFoundError):
        tier.read(c)
    assert tier.admit(c, CHUNK) == (True, 1)
    assert (tier.exists(a), tier.exists(b)) == (False, True)


def test_a_chunk_written_right_after_a_hit_is_the_more_recently_used(tmp_path: Path) -> None:
    # The kernel stamps a write's mtime from a clock that ticks every few milliseconds, earlier than
    # the hit's nanosecond stamp taken just before it: C would look older than A, and be evicted
    # before it. The tier stamps its writes itself.
    tier = _tier(tmp_path, 3)
    a, b, c, d, e = (bytes([i]) * 32 for i in (1, 2, 3, 4, 5))
    tier.write(a, _data(a))
    tier.write(b, _data(b))
    tier.read(a)
    tier.write(c, _data(c))
    assert tier.admit(d, CHUNK) == (True, 1) and tier.admit(e, CHUNK) == (True, 1)
    assert [tier.exists(x) for x in (a, b, c)] == [False, False, True]
