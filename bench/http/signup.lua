-- signup.lua - the signup workload over HTTP, for wrk:
--   wrk -t2 -c32 -d5s --latency -s bench/http/signup.lua http://127.0.0.1:8080
-- Each request is POST /v1/users with three unique values (email, phone and
-- the pair provider/external_id; schema in bench/http/load.sh). Values are
-- fresh per request, except that about 1 request in 10 reuses one value of
-- an earlier request of the same wrk thread (the email in another case, the
-- phone, or the pair) and must be refused with 409. At the end it prints
-- the statuses seen: "statuses: 201=N 409=N other=N".

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

-- counters are globals: done() reads them with thread:get()
c201, c409, other = 0, 0, 0
local n = 0
local nonce
local past = {}      -- values of earlier requests, a ring of RING entries
local RING = 4096

function init(args)
  math.randomseed(os.time() * 1000 + tid)
  nonce = string.format("%x%x", os.time(), math.random(0, 0xffffff))
end

local function fresh(k)
  local key = string.format("%s-%d-%d", nonce, tid, k)
  return {
    id = "u" .. key,
    email = "user" .. key .. "@example.com",
    phone = string.format("+1%d%09d", tid, k),
    provider = "p" .. (k % 7),
    external_id = "x" .. key,
  }
end

function request()
  n = n + 1
  local u = fresh(n)
  -- a deliberate collision with a request at least 256 requests old (so
  -- that it has been answered, whatever the connection count)
  if n > 512 and math.random(10) == 1 then
    local old = past[math.random(n - 512, n - 256) % RING]
    if old then
      local kind = math.random(3)
      if kind == 1 then
        u.email = string.upper(old.email)
      elseif kind == 2 then
        u.phone = old.phone
      else
        u.provider, u.external_id = old.provider, old.external_id
      end
    end
  end
  past[n % RING] = u
  local body = string.format(
    '{"id":"%s","email":"%s","phone":"%s","provider":"%s","external_id":"%s","name":"load test"}',
    u.id, u.email, u.phone, u.provider, u.external_id)
  return wrk.format("POST", "/v1/users", {["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
  if status == 201 then
    c201 = c201 + 1
  elseif status == 409 then
    c409 = c409 + 1
  else
    other = other + 1
    if other <= 3 then io.stderr:write("unexpected status ", status, ": ", body, "\n") end
  end
end

function done(summary, latency, requests)
  local a, b, o = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("c201")
    b = b + t:get("c409")
    o = o + t:get("other")
  end
  io.write(string.format("statuses: 201=%d 409=%d other=%d\n", a, b, o))
  io.write(string.format("latency_us: p50=%d p90=%d p99=%d\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
