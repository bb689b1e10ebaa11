"""The app's one cache idiom: cachetools caches bounded in bytes, shared by the sessions."""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tinygpt_app.compute.shared_cache import SCALAR_BYTES, SharedCache, nbytes_of, shared

ROOT = Path(__file__).resolve().parents[3]


def test_it_keeps_at_most_its_bytes_and_forgets_the_least_recently_used():
    cache = SharedCache(100, sizeof=len)
    assert cache.put("a", "x" * 60) and cache.put("b", "x" * 30)
    cache.get("a")  # "a" is now the most recently used
    assert cache.put("c", "x" * 30)  # 120 bytes: the least recently used ("b") goes
    assert cache.get("b") is None and cache.get("a") and cache.get("c")
    assert cache.nbytes == 90 and len(cache) == 2


def test_a_value_bigger_than_the_whole_budget_is_not_kept():
    cache = SharedCache(100, sizeof=len)
    cache.put("a", "x" * 50)
    assert not cache.put("big", "x" * 101)
    assert "big" not in cache and cache.get("a") and cache.nbytes == 50
    cache.put("a", "x" * 101)  # a key's new value too big: the key is gone, not stale
    assert "a" not in cache and cache.nbytes == 0


def test_setdefault_shares_the_first_value_made():
    cache = SharedCache(100, sizeof=len)
    first = cache.setdefault("k", "made first")
    assert cache.setdefault("k", "made second") is first
    assert cache.setdefault("big", "x" * 200) == "x" * 200 and "big" not in cache


def test_a_ttl_cache_forgets_after_its_seconds():
    now = [0.0]
    cache = SharedCache(1000, sizeof=len, ttl=1.0, timer=lambda: now[0])
    cache.put("listing", "a.npz b.npz")
    now[0] = 0.9
    assert cache.get("listing") == "a.npz b.npz"
    now[0] = 1.1
    assert cache.get("listing") is None
    with pytest.raises(TypeError):
        cache.weigh_again()


def test_weighing_again_keeps_the_order_and_makes_room_for_what_grew():
    grown = {"size": 10}
    sizes = {"a": 10, "b": 10, "c": 10}
    cache = SharedCache(30, sizeof=lambda key: grown["size"] if key == "c" else sizes[key])
    for key in "abc":
        cache.put(key, key)  # the values are their own keys, so sizeof can tell them apart
    cache.get("a")  # order, least recently used first: b, c, a
    cache.weigh_again()  # taken out and put back least recently used first
    assert cache.nbytes == 30 and [k for k, _ in cache.entries()] == ["b", "c", "a"]
    grown["size"] = 20
    cache.weigh_again()  # c now weighs 20: b (the least recently used) goes, not a
    assert "b" not in cache and "a" in cache and "c" in cache and cache.nbytes == 30


def test_entries_are_read_without_becoming_recently_used():
    cache = SharedCache(30, sizeof=len)
    for key in "abc":
        cache.put(key, "x" * 10)
    assert [k for k, _ in cache.entries()] == ["a", "b", "c"]
    cache.put("d", "x" * 10)  # "a" is still the least recently used
    assert "a" not in cache and all(k in cache for k in "bcd")


def test_threads_putting_at_once_keep_the_bound():
    cache = SharedCache(1000, sizeof=len)

    def worker(n: int) -> None:
        for i in range(300):
            cache.put((n, i), "x" * (i % 50 + 1))
            cache.get((n, i - 1))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert cache.nbytes <= 1000
    assert cache.nbytes == sum(len(value) for _, value in cache.entries())


@dataclass
class _Result:
    tokens: np.ndarray
    all_ids: np.ndarray
    steps: list
    note: str


def test_nbytes_of_weighs_arrays_containers_and_dataclasses():
    tokens = np.zeros(1000, dtype=np.int64)
    result = _Result(tokens, tokens, [1, 2, 3], "eos")  # one array in two fields
    weight = nbytes_of(result)
    assert tokens.nbytes < weight < tokens.nbytes + 1000  # the array counted once
    big = _Result(np.zeros(10**5, dtype=np.float32), tokens, [], "")
    assert nbytes_of(big) >= 4 * 10**5 + tokens.nbytes
    assert nbytes_of(list(range(100))) == sys.getsizeof(list(range(100))) + 100 * SCALAR_BYTES
    nested = {"a": [np.ones(10), (np.ones(20), "text")]}
    assert nbytes_of(nested) >= 30 * 8 + len("text")


def test_nbytes_of_asks_an_object_that_weighs_itself():
    class Lean:
        nbytes = 12345

    assert nbytes_of(Lean()) == 12345


APP_SOURCES = [ROOT / "app.py", *(ROOT / "pages").rglob("*.py"),
               *(ROOT / "tinygpt_app").rglob("*.py"), *(ROOT / "tinygpt_hosting").rglob("*.py")]


def test_the_app_has_no_hand_written_lru_cache_left():
    """One idiom: the app's caches are SharedCache (cachetools) or st.cache_resource."""
    hand_made = re.compile(r"OrderedDict|move_to_end|popitem\(last=False\)|pop\(next\(iter\(")
    found = [str(path.relative_to(ROOT)) for path in APP_SOURCES
             if hand_made.search(path.read_text(encoding="utf-8"))]
    assert not found


def test_streamlit_keeps_the_models_and_nothing_else():
    """One idiom: st.cache_resource keeps the loaded models (bounded in entries: a model is
    what it is), every other shared result is a SharedCache bounded in bytes (@shared)."""
    decorator = re.compile(r"@st\.cache_(resource|data)(\((?P<args>[^)]*)\))?")
    seen = [(path.relative_to(ROOT).as_posix(), match["args"] or "")
            for path in APP_SOURCES
            for match in decorator.finditer(path.read_text(encoding="utf-8"))]
    assert [where for where, _ in seen] == ["tinygpt_app/compute/models.py"]
    assert "max_entries=" in seen[0][1]


def test_a_shared_function_keys_on_its_plain_arguments_and_makes_each_entry_once():
    made = []

    @shared(1000, sizeof=len)
    def doubled(model_id: str, text: str, _model: object) -> str:
        made.append(text)
        return text * 2

    assert doubled("m", "ab", object()) == "abab"
    assert doubled("m", "ab", object()) == "abab"  # another _model object: the same key
    assert doubled(model_id="m", text="ab", _model=None) == "abab"
    assert made == ["ab"]
    assert doubled("m", "x" * 600, None) == "x" * 1200  # over the bound: given, not kept
    assert doubled("m", "x" * 600, None) and made == ["ab", "x" * 600, "x" * 600]
    assert doubled.cache.nbytes == 4


def test_sessions_asking_at_once_wait_for_one_maker():
    started, release, made = threading.Event(), threading.Event(), []

    @shared(1000, sizeof=len)
    def slow(key: str) -> str:
        made.append(key)
        started.set()
        release.wait(5)
        return key

    first = threading.Thread(target=slow, args=("k",))
    first.start()
    started.wait(5)
    second = threading.Thread(target=slow, args=("k",))
    second.start()
    release.set()
    first.join(5)
    second.join(5)
    assert made == ["k"]


# ----------------------------------------------------------------------------- idle entries


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_entries_unused_for_the_idle_time_are_dropped_and_used_ones_kept():
    clock = FakeClock()
    cache = SharedCache(1000, sizeof=len, timer=clock)
    cache.put("prank", "x" * 300)
    cache.put("class", "y" * 200)
    clock.now += 50
    assert cache.get("class")  # the class reads its prompt: its clock starts again
    clock.now += 20  # "prank" unused for 70 s, "class" for 20 s
    assert cache.drop_idle(60) == 300
    assert "prank" not in cache and cache.get("class") and cache.nbytes == 200
    clock.now += 61
    assert cache.drop_idle(60) == 200 and len(cache) == 0


def test_a_miss_setdefault_and_weighing_again_count_as_they_should():
    clock = FakeClock()
    cache = SharedCache(1000, sizeof=len, timer=clock)
    cache.put("a", "x" * 10)
    clock.now += 40
    assert cache.get("missing") is None  # a miss is no use of anything
    assert cache.setdefault("a", "other") == "x" * 10  # found: a use
    cache.put("b", "z" * 10)
    clock.now += 40
    cache.weigh_again()  # the trace cache weighs every entry at each new trace: no use
    clock.now += 25
    assert cache.drop_idle(60) == 20 and len(cache) == 0  # both 65 s unused


def test_a_ttl_cache_keeps_its_ttl_and_also_drops_idle_entries():
    clock = FakeClock()
    cache = SharedCache(1000, sizeof=len, ttl=30, timer=clock)
    cache.put("a", "x")
    clock.now += 31
    assert cache.get("a") is None  # gone by its TTL
    cache.put("b", "y")
    clock.now += 20
    assert cache.drop_idle(10) == 1 and len(cache) == 0


def test_keys_the_cache_dropped_itself_do_not_pile_up():
    cache = SharedCache(100, sizeof=len)
    for n in range(1000):
        cache.put(n, "x" * 50)  # two fit: the rest are pushed out by the byte bound
    assert len(cache) == 2 and len(cache._used) <= 2 * 2 + 65


def test_the_sweep_goes_over_every_cache_of_the_process():
    from tinygpt_app.compute import shared_cache

    clock = FakeClock()
    first = SharedCache(1000, sizeof=len, timer=clock)
    second = SharedCache(1000, sizeof=len, timer=clock)
    first.put("a", "x" * 10)
    second.put("b", "y" * 20)
    clock.now += 61
    assert shared_cache.sweep(60) >= 30
    assert len(first) == len(second) == 0
