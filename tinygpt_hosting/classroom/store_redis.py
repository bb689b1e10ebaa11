"""The class store in Redis, for an app spread over several machines (deploy/k8s/).

Selected by `TINYGPT_CLASS_STORE=redis://host:port/db`. Same methods, refusals and semantics as
the SQLite store (class_store.py). Each method is one Lua script, which Redis runs atomically:
the caps hold and each guess is counted once however many app processes call at the same time.
Expiry follows the clock the classroom passes in (as with SQLite), not Redis's key expiry:
expired classes are deleted when a class is created or the stats are read.

One Redis (or a managed primary) holds the store; Redis Cluster is not supported (a script
reaches keys of the class list and of one class together).

Keys, under the prefix (default "tinygpt:"):
  classes         sorted set: class code -> expiry time
  c:CODE          hash: secret (its hash), expires, version, state, rounds
  c:CODE:s        sorted set: student id -> last seen
  c:CODE:f        sorted set: student id -> last seen, for the students who follow
  c:CODE:n        hash: student id -> nickname
  c:CODE:r:N      hash: question, revealed, for round N
  c:CODE:g:N      hash: student id -> guess, for round N
  c:CODE:b        hash: student id -> browser token (c:CODE:B the other way round)
  c:CODE:a        hash: student id -> client address
  c:CODE:X        hash: client address -> students removed from it (each: one seat less)
  c:CODE:x        set: the browsers the teacher removed
  teachers        hash: a teacher's browser token -> its class code (one class per browser)
  made:ADDRESS    sorted set: classes started from ADDRESS -> when (expires with its window)
The class hash also holds locked, hidden (names) and tb (the teacher's browser).
  c:CODE:k        sorted set: browser key -> when kept, the class's resume keys
  k:KEY           hash: code, value: a browser's way back into a class (classroom.resume)
"""

from __future__ import annotations

import json
import math

import redis

from tinygpt_hosting.classroom.store import (
    ClassError,
    ClassStore,
    ClassSummary,
    Creator,
    Pulse,
    Seat,
    Seating,
    StoredRound,
    StoreStats,
    StudentPoll,
)

# Shared by every script: ARGV[1] is the key prefix, then each script's own arguments.
# A script answers JSON: {refused = reason} or its result.
_PRELUDE = """
local P = ARGV[1]
local function key(code, suffix) return P .. 'c:' .. code .. (suffix or '') end
local function refuse(reason) return cjson.encode({refused = reason}) end
local function live(code, now)
  local expires = redis.call('HGET', key(code), 'expires')
  return expires and tonumber(expires) > tonumber(now)
end
local function member(code, student) return redis.call('ZSCORE', key(code, ':s'), student) end
local function touch(code, expires)
  redis.call('HSET', key(code), 'expires', expires)
  redis.call('ZADD', P .. 'classes', expires, code)
end
local function drop(code)
  local rounds = tonumber(redis.call('HGET', key(code), 'rounds') or '0')
  for i = 1, rounds do redis.call('DEL', key(code, ':r:' .. i), key(code, ':g:' .. i)) end
  for _, k in ipairs(redis.call('ZRANGE', key(code, ':k'), 0, -1)) do
    redis.call('DEL', P .. 'k:' .. k)
  end
  local tb = redis.call('HGET', key(code), 'tb')
  if tb and tb ~= '' and redis.call('HGET', P .. 'teachers', tb) == code then
    redis.call('HDEL', P .. 'teachers', tb)
  end
  redis.call('DEL', key(code), key(code, ':s'), key(code, ':f'), key(code, ':n'),
             key(code, ':b'), key(code, ':B'), key(code, ':a'), key(code, ':x'),
             key(code, ':X'), key(code, ':k'))
  redis.call('ZREM', P .. 'classes', code)
end
local function purge(now, orphan_expires, orphan_seen)
  for _, code in ipairs(redis.call('ZRANGEBYSCORE', P .. 'classes', '-inf', now)) do
    drop(code)
  end
  if orphan_expires and orphan_expires ~= '' then  -- left: teacher gone and nobody here
    for _, code in ipairs(redis.call('ZRANGEBYSCORE', P .. 'classes', '-inf', orphan_expires)) do
      local last = redis.call('ZRANGE', key(code, ':s'), -1, -1, 'WITHSCORES')
      if #last == 0 or tonumber(last[2]) <= tonumber(orphan_seen) then drop(code) end
    end
  end
end
local function unseat(code, student)
  redis.call('ZREM', key(code, ':s'), student)
  redis.call('ZREM', key(code, ':f'), student)
  redis.call('HDEL', key(code, ':n'), student)
  local browser = redis.call('HGET', key(code, ':b'), student)
  if browser then redis.call('HDEL', key(code, ':B'), browser) end
  redis.call('HDEL', key(code, ':b'), student)
  redis.call('HDEL', key(code, ':a'), student)
end
local function round_of(code, n, student)
  local r, g = key(code, ':r:' .. n), key(code, ':g:' .. n)
  local out = {number = n, question = redis.call('HGET', r, 'question'),
               revealed = redis.call('HGET', r, 'revealed') == '1',
               answers = redis.call('HLEN', g)}
  if student then out.answered = redis.call('HEXISTS', g, student) == 1 end
  return out
end
local function rounds_of(code) return tonumber(redis.call('HGET', key(code), 'rounds')) end
"""

_SCRIPTS = {
    # key, code, value, now, max per class, evictable (1/0): a key kept for good scores +inf
    "keep_resume": """
local k, code, now = ARGV[2], ARGV[3], ARGV[5]
if not live(code, now) then return refuse('no_class') end
local before = redis.call('HGET', P .. 'k:' .. k, 'code')
if before then redis.call('ZREM', key(before, ':k'), k) end
redis.call('HSET', P .. 'k:' .. k, 'code', code, 'value', ARGV[4])
redis.call('ZADD', key(code, ':k'), ARGV[7] == '1' and now or '+inf', k)
local extra = redis.call('ZCOUNT', key(code, ':k'), '-inf', '(+inf') - tonumber(ARGV[6])
if extra > 0 then
  for _, old in ipairs(redis.call('ZRANGE', key(code, ':k'), 0, extra - 1)) do
    redis.call('DEL', P .. 'k:' .. old)
    redis.call('ZREM', key(code, ':k'), old)
  end
end
return '{}'
""",
    # key, now
    "resume_of": """
local kept = redis.call('HMGET', P .. 'k:' .. ARGV[2], 'code', 'value')
if not kept[1] or not live(kept[1], ARGV[3]) then return '{}' end
return cjson.encode({code = kept[1], value = kept[2]})
""",
    # key
    "drop_resume": """
local before = redis.call('HGET', P .. 'k:' .. ARGV[2], 'code')
if before then redis.call('ZREM', key(before, ':k'), ARGV[2]) end
redis.call('DEL', P .. 'k:' .. ARGV[2])
return '{}'
""",
    # code, secret hash, now, expires, max classes, browser, address, since,
    # max per address, orphan expires before ('' for none), orphan seen before
    "create": """
local code, browser, address, per = ARGV[2], ARGV[7], ARGV[8], tonumber(ARGV[10])
purge(ARGV[4], ARGV[11], ARGV[12])
local made = P .. 'made:' .. address
if address ~= '' and per > 0 then
  redis.call('ZREMRANGEBYSCORE', made, '-inf', ARGV[9])
  if redis.call('ZCARD', made) >= per then return refuse('too_many_classes') end
end
if browser ~= '' then
  local earlier = redis.call('HGET', P .. 'teachers', browser)
  if earlier then drop(earlier) end
end
if redis.call('ZCARD', P .. 'classes') >= tonumber(ARGV[6]) then return refuse('server_full') end
if redis.call('EXISTS', key(code)) == 1 then return cjson.encode({taken = true}) end
redis.call('HSET', key(code), 'secret', ARGV[3], 'version', 0, 'rounds', 0, 'tb', browser)
touch(code, ARGV[5])
if browser ~= '' then redis.call('HSET', P .. 'teachers', browser, code) end
if address ~= '' then
  redis.call('ZADD', made, ARGV[4], code)
  redis.call('EXPIRE', made, math.max(1, math.ceil(tonumber(ARGV[4]) - tonumber(ARGV[9]))))
end
return cjson.encode({taken = false})
""",
    # code, now
    "secret": """
if not live(ARGV[2], ARGV[3]) then return refuse('no_class') end
return cjson.encode({secret = redis.call('HGET', key(ARGV[2]), 'secret')})
""",
    # code
    "close": """
if redis.call('EXISTS', key(ARGV[2])) == 1 then drop(ARGV[2]) end
return '{}'
""",
    # code, now, expires, state
    "publish": """
local code = ARGV[2]
if not live(code, ARGV[3]) then return refuse('no_class') end
local version = redis.call('HINCRBY', key(code), 'version', 1)
redis.call('HSET', key(code), 'state', ARGV[5])
touch(code, ARGV[4])
return cjson.encode({version = version})
""",
    # code, student, nickname, now, stale before, max students, browser, address,
    # max per address
    "join": """
local code, student, nickname, now = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local browser, address, per = ARGV[8], ARGV[9], tonumber(ARGV[10])
if not live(code, now) then return refuse('no_class') end
local s, f, n = key(code, ':s'), key(code, ':f'), key(code, ':n')
if browser ~= '' then
  if redis.call('SISMEMBER', key(code, ':x'), browser) == 1 then return refuse('removed') end
  student = redis.call('HGET', key(code, ':B'), browser) or student
end
if not member(code, student) then
  if redis.call('HGET', key(code), 'locked') == '1' then return refuse('locked') end
  if address ~= '' and per > 0 then
    local seats, stale, stale_seen = 0, nil, nil
    local all = redis.call('HGETALL', key(code, ':a'))
    for i = 1, #all, 2 do
      if all[i + 1] == address then
        seats = seats + 1
        local seen = tonumber(redis.call('ZSCORE', s, all[i]))
        if seen <= tonumber(ARGV[6]) and (stale == nil or seen < stale_seen
            or (seen == stale_seen and all[i] < stale)) then
          stale, stale_seen = all[i], seen
        end
      end
    end
    local removals = tonumber(redis.call('HGET', key(code, ':X'), address) or '0')
    if seats >= per - removals then
      if stale == nil then
        return refuse(removals > 0 and 'address_removed' or 'address_full')
      end
      unseat(code, stale)
    end
  end
  if redis.call('ZCARD', s) >= tonumber(ARGV[7]) then
    local oldest = redis.call('ZRANGEBYSCORE', s, '-inf', ARGV[6], 'LIMIT', 0, 1)
    if #oldest == 0 then return refuse('class_full') end
    unseat(code, oldest[1])
  end
  if browser ~= '' then
    redis.call('HSET', key(code, ':b'), student, browser)
    redis.call('HSET', key(code, ':B'), browser, student)
  end
  if address ~= '' then redis.call('HSET', key(code, ':a'), student, address) end
end
redis.call('ZADD', s, now, student)
redis.call('ZADD', f, 'XX', now, student)
if nickname == '' then
  redis.call('HDEL', n, student)
else
  redis.call('HSET', n, student, nickname)
end
return cjson.encode({student = student})
""",
    # code, browser, now
    "browser_seat": """
if not live(ARGV[2], ARGV[4]) then return refuse('no_class') end
return cjson.encode({student = redis.call('HGET', key(ARGV[2], ':B'), ARGV[3]) or ''})
""",
    # code, now, expires, locked ('', '1', '0'), names hidden (the same)
    "moderate": """
local code = ARGV[2]
if not live(code, ARGV[3]) then return refuse('no_class') end
if ARGV[5] ~= '' then redis.call('HSET', key(code), 'locked', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', key(code), 'hidden', ARGV[6]) end
touch(code, ARGV[4])
return '{}'
""",
    # code, student, now, expires, max removed
    "remove": """
local code, student = ARGV[2], ARGV[3]
if not live(code, ARGV[4]) then return refuse('no_class') end
if not member(code, student) then return refuse('not_member') end
local browser = redis.call('HGET', key(code, ':b'), student)
if browser then
  if redis.call('SCARD', key(code, ':x')) >= tonumber(ARGV[6]) then
    return refuse('removed_full')
  end
  redis.call('SADD', key(code, ':x'), browser)
end
local address = redis.call('HGET', key(code, ':a'), student)
if address and address ~= '' then redis.call('HINCRBY', key(code, ':X'), address, 1) end
for i = 1, rounds_of(code) do redis.call('HDEL', key(code, ':g:' .. i), student) end
unseat(code, student)
touch(code, ARGV[5])
return '{}'
""",
    # code, now, connected after
    "seats": """
local code = ARGV[2]
if not live(code, ARGV[3]) then return refuse('no_class') end
local out = {}
local all = redis.call('ZRANGE', key(code, ':s'), 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  table.insert(out, {all[i], redis.call('HGET', key(code, ':n'), all[i]) or '',
                     tonumber(all[i + 1]) > tonumber(ARGV[4])})
end
return cjson.encode({seats = out})
""",
    # code, student, following (1/0), now
    # code, now
    "pulse": """
local code = ARGV[2]
if not live(code, ARGV[3]) then return refuse('no_class') end
local c = redis.call('HMGET', key(code), 'version', 'rounds', 'state')
local n = tonumber(c[2])
local revealed = n > 0 and redis.call('HGET', key(code, ':r:' .. n), 'revealed') == '1'
local page = ''
if c[3] then
  local ok, view = pcall(cjson.decode, c[3])
  if ok and type(view) == 'table' and type(view.page) == 'string' then page = view.page end
end
return cjson.encode({version = tonumber(c[1]), rounds = n, revealed = revealed, page = page})
""",
    # code, student, now
    "peek": """
local code, student = ARGV[2], ARGV[3]
if not live(code, ARGV[4]) then return refuse('no_class') end
if not member(code, student) then return refuse('not_member') end
local c = redis.call('HMGET', key(code), 'version', 'state', 'rounds')
local out = {version = tonumber(c[1]), state = c[2]}
if tonumber(c[3]) > 0 then out.round = round_of(code, tonumber(c[3]), student) end
return cjson.encode(out)
""",
    "poll": """
local code, student, now = ARGV[2], ARGV[3], ARGV[5]
if not live(code, now) then return refuse('no_class') end
if not member(code, student) then return refuse('not_member') end
redis.call('ZADD', key(code, ':s'), now, student)
if ARGV[4] == '1' then
  redis.call('ZADD', key(code, ':f'), now, student)
else
  redis.call('ZREM', key(code, ':f'), student)
end
local c = redis.call('HMGET', key(code), 'version', 'state', 'rounds')
local out = {version = tonumber(c[1]), state = c[2]}
if tonumber(c[3]) > 0 then out.round = round_of(code, tonumber(c[3]), student) end
return cjson.encode(out)
""",
    # code, now, expires, question, max rounds
    "open_round": """
local code = ARGV[2]
if not live(code, ARGV[3]) then return refuse('no_class') end
if rounds_of(code) >= tonumber(ARGV[6]) then return refuse('too_many_rounds') end
local n = redis.call('HINCRBY', key(code), 'rounds', 1)
redis.call('HSET', key(code, ':r:' .. n), 'question', ARGV[5], 'revealed', '0')
touch(code, ARGV[4])
return cjson.encode({number = n})
""",
    # code, student, number, guess, now, max answers
    "submit": """
local code, student, number = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not live(code, ARGV[6]) then return refuse('no_class') end
if not member(code, student) then return refuse('not_member') end
local rounds = rounds_of(code)
if number < 1 or number > rounds then return refuse('no_round') end
if number ~= rounds or redis.call('HGET', key(code, ':r:' .. number), 'revealed') == '1' then
  return refuse('round_closed')
end
local g = key(code, ':g:' .. number)
if redis.call('HEXISTS', g, student) == 1 then return refuse('answered') end
if redis.call('HLEN', g) >= tonumber(ARGV[7]) then return refuse('round_full') end
redis.call('HSET', g, student, ARGV[5])
return '{}'
""",
    # code, number, now, expires
    "reveal": """
local code, number = ARGV[2], tonumber(ARGV[3])
if not live(code, ARGV[4]) then return refuse('no_class') end
if number < 1 or number > rounds_of(code) then return refuse('no_round') end
redis.call('HSET', key(code, ':r:' .. number), 'revealed', '1')
touch(code, ARGV[5])
return '{}'
""",
    # code, number, member ('' for the teacher), now
    "guesses": """
local code, number, student = ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not live(code, ARGV[5]) then return refuse('no_class') end
if student ~= '' and not member(code, student) then return refuse('not_member') end
if number < 1 or number > rounds_of(code) then return refuse('no_round') end
local round = round_of(code, number)
if not round.revealed then return refuse('not_revealed') end
return cjson.encode({round = round, guesses = redis.call('HVALS', key(code, ':g:' .. number))})
""",
    # code, now, expires, connected after
    "summary": """
local code, after = ARGV[2], '(' .. ARGV[5]
if not live(code, ARGV[3]) then return refuse('no_class') end
touch(code, ARGV[4])
local s, f = key(code, ':s'), key(code, ':f')
local c = redis.call('HMGET', key(code), 'version', 'state', 'locked', 'hidden')
local out = {version = tonumber(c[1]), state = c[2], students = redis.call('ZCARD', s),
             locked = c[3] == '1', hidden = c[4] == '1',
             connected = redis.call('ZCOUNT', s, after, '+inf'),
             following = redis.call('ZCOUNT', f, after, '+inf'), nicknames = {}, rounds = {}}
for _, student in ipairs(redis.call('ZRANGEBYSCORE', s, after, '+inf')) do
  local nickname = redis.call('HGET', key(code, ':n'), student)
  if nickname then table.insert(out.nicknames, nickname) end
end
for i = 1, rounds_of(code) do table.insert(out.rounds, round_of(code, i)) end
return cjson.encode(out)
""",
    # now
    "stats": """
purge(ARGV[2])
local out = {classes = 0, students = 0, rounds = 0, guesses = 0, keys = {P .. 'classes'}}
for _, code in ipairs(redis.call('ZRANGE', P .. 'classes', 0, -1)) do
  local rounds = rounds_of(code)
  out.classes = out.classes + 1
  out.students = out.students + redis.call('ZCARD', key(code, ':s'))
  out.rounds = out.rounds + rounds
  for _, suffix in ipairs({'', ':s', ':f', ':n', ':b', ':B', ':a', ':x', ':X'}) do
    table.insert(out.keys, key(code, suffix))
  end
  for i = 1, rounds do
    out.guesses = out.guesses + redis.call('HLEN', key(code, ':g:' .. i))
    table.insert(out.keys, key(code, ':r:' .. i))
    table.insert(out.keys, key(code, ':g:' .. i))
  end
end
return cjson.encode(out)
""",
}


def _stored_round(data: dict) -> StoredRound:
    return StoredRound(int(data["number"]), data["question"], bool(data["revealed"]),
                       int(data["answers"]), bool(data.get("answered", False)))


def _state(value: object) -> str | None:
    return value if isinstance(value, str) else None  # cjson turns a missing field into false


class RedisClassStore(ClassStore):
    """The class store in one Redis database; `url` as redis-py reads it (redis://host:port/db,
    with a password as redis://:password@host:port/db)."""

    def __init__(self, url: str, *, prefix: str = "tinygpt:", timeout_s: float = 5.0) -> None:
        self.prefix = prefix
        self.client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                           socket_connect_timeout=timeout_s,
                                           health_check_interval=30)
        self._scripts = {name: self.client.register_script(_PRELUDE + body)
                         for name, body in _SCRIPTS.items()}

    def _run(self, script: str, *args: object, **numbers: int) -> dict:
        """Run a script; a refusal becomes ClassError, an unreachable Redis "unavailable"."""
        try:
            raw = self._scripts[script](args=[self.prefix, *(_arg(a) for a in args)])
        except redis.RedisError as error:
            raise ClassError("unavailable") from error
        data = json.loads(raw)
        if "refused" in data:
            raise ClassError(data["refused"], **numbers)
        return data

    def create_class(self, code: str, secret_hash: str, now: float, expires: float,
                     max_classes: int, creator: Creator | None = None) -> bool:
        c = creator or Creator()
        orphan = c.orphan_expires_before if math.isfinite(c.orphan_expires_before) else ""
        data = self._run("create", code, secret_hash, now, expires, max_classes, c.browser,
                         c.address, c.since, c.max_per_address, orphan, c.orphan_seen_before,
                         max_classes=max_classes, max_per_address=c.max_per_address)
        return not data["taken"]

    def secret_hash(self, code: str, now: float) -> str:
        return self._run("secret", code, now)["secret"]

    def close_class(self, code: str) -> None:
        self._run("close", code)

    def publish(self, code: str, state: str, now: float, expires: float) -> int:
        return int(self._run("publish", code, now, expires, state)["version"])

    def join(self, code: str, student: str, nickname: str, now: float, stale_before: float,
             max_students: int, seating: Seating | None = None) -> str:
        s = seating or Seating()
        return self._run("join", code, student, nickname, now, stale_before, max_students,
                         s.browser, s.address, s.max_per_address, max_students=max_students,
                         max_per_address=s.max_per_address)["student"]

    def student_for_browser(self, code: str, browser: str, now: float) -> str | None:
        return self._run("browser_seat", code, browser, now)["student"] or None

    def moderate(self, code: str, now: float, expires: float, *, locked: bool | None = None,
                 names_hidden: bool | None = None) -> None:
        flag = {None: "", True: "1", False: "0"}
        self._run("moderate", code, now, expires, flag[locked], flag[names_hidden])

    def remove_student(self, code: str, student: str, now: float, expires: float,
                       max_removed: int) -> None:
        self._run("remove", code, student, now, expires, max_removed, max_removed=max_removed)

    def seats(self, code: str, now: float, connected_after: float) -> tuple[Seat, ...]:
        rows = self._run("seats", code, now, connected_after)["seats"] or []
        seats = [Seat(student, nickname, bool(connected)) for student, nickname, connected in rows]
        return tuple(sorted(seats, key=lambda seat: (not seat.connected, seat.nickname,
                                                     seat.student)))

    def pulse(self, code: str, now: float) -> Pulse:
        data = self._run("pulse", code, now)
        page = data.get("page")
        return Pulse(int(data["version"]), int(data["rounds"]), bool(data["revealed"]),
                     page if isinstance(page, str) else "")

    def poll(self, code: str, student: str, following: bool, now: float) -> StudentPoll:
        return _student_poll(self._run("poll", code, student, int(following), now))

    def peek(self, code: str, student: str, now: float) -> StudentPoll:
        return _student_poll(self._run("peek", code, student, now))

    def open_round(self, code: str, question: str, now: float, expires: float,
                   max_rounds: int) -> int:
        return int(self._run("open_round", code, now, expires, question, max_rounds,
                             max_rounds=max_rounds)["number"])

    def submit_guess(self, code: str, student: str, number: int, guess: str, now: float,
                     max_answers: int) -> None:
        self._run("submit", code, student, number, guess, now, max_answers,
                  max_students=max_answers)

    def reveal(self, code: str, number: int, now: float, expires: float) -> None:
        self._run("reveal", code, number, now, expires)

    def round_guesses(self, code: str, number: int, member: str | None,
                      now: float) -> tuple[StoredRound, list[str]]:
        data = self._run("guesses", code, number, member or "", now)
        return _stored_round(data["round"]), list(data["guesses"] or [])

    def summary(self, code: str, now: float, expires: float,
                connected_after: float) -> ClassSummary:
        data = self._run("summary", code, now, expires, connected_after)
        return ClassSummary(int(data["version"]), _state(data.get("state")),
                            int(data["students"]), int(data["connected"]),
                            int(data["following"]), tuple(sorted(data["nicknames"] or [])),
                            tuple(_stored_round(r) for r in data["rounds"] or []),
                            bool(data.get("locked")), bool(data.get("hidden")))

    def stats(self, now: float) -> StoreStats:
        data = self._run("stats", now)
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for key in data["keys"]:
                    pipe.memory_usage(key, samples=0)
                sizes = pipe.execute()
        except redis.RedisError as error:
            raise ClassError("unavailable") from error
        return StoreStats(data["classes"], data["students"], data["rounds"], data["guesses"],
                          bytes=sum(size or 0 for size in sizes))

    def keep_resume(self, key: str, code: str, value: str, now: float, max_per_class: int, *,
                    evictable: bool = True) -> None:
        self._run("keep_resume", key, code, value, now, max_per_class, int(evictable))

    def resume_of(self, key: str, now: float) -> tuple[str, str] | None:
        data = self._run("resume_of", key, now)
        return (data["code"], data["value"]) if "code" in data else None

    def drop_resume(self, key: str) -> None:
        self._run("drop_resume", key)


def _arg(value: object) -> str:
    """Script arguments as text; floats with all their digits (repr), so that times compare
    exactly as in SQLite."""
    return repr(value) if isinstance(value, float) else str(value)


def _student_poll(data: dict) -> StudentPoll:
    latest = _stored_round(data["round"]) if "round" in data else None
    return StudentPoll(int(data["version"]), _state(data.get("state")), latest)
