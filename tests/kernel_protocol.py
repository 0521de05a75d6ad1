#!/usr/bin/python3
"""The Jupyter kernel (`xsa --kernel`) driven by Debian's jupyter_client, as
a notebook front end drives it. Run by tests/test_kernel.lua:

    /usr/bin/python3 tests/kernel_protocol.py path/to/xsa

Prints FAIL lines and ends with "kernel_protocol: N passed, M failed".
"""
import base64
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import zmq
from jupyter_client.manager import start_new_kernel

EXE = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="xsa-kernel-")
subprocess.run([EXE, "--install-kernel", "--prefix", TMP], check=True, stdout=subprocess.DEVNULL)
os.environ["JUPYTER_PATH"] = os.path.join(TMP, "share", "jupyter")
passed = failed = 0


def drain(get):
    """Drops every message waiting on one channel (msg_ready is a coroutine
    in newer jupyter_client, so poll with a short timeout instead)."""
    while True:
        try:
            get(timeout=0.2)
        except Exception:
            return


def case(fn):
    global passed, failed
    try:
        fn()
        passed += 1
    except Exception:
        failed += 1
        print("FAIL %s: %s" % (fn.__name__, traceback.format_exc()), flush=True)
        time.sleep(2)  # what the failed case left behind is not the next case's
        for get in (kc.get_shell_msg, kc.get_iopub_msg, kc.get_stdin_msg):
            drain(get)
    return fn


def run(code, timeout=60, wait=True):
    """Executes code; returns (reply content, [iopub messages of it])."""
    msg_id = kc.execute(code)
    if not wait:
        return msg_id
    return collect(msg_id, timeout)


def collect(msg_id, timeout=60):
    reply = kc.get_shell_msg(timeout=timeout)
    assert reply["parent_header"]["msg_id"] == msg_id, reply
    out, deadline = [], time.time() + timeout
    while time.time() < deadline:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return reply["content"], out
        out.append(m)
    raise AssertionError("no idle status for " + msg_id)


def of(out, t):
    return [m["content"] for m in out if m["msg_type"] == t]


def png_size(data):
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", raw[:16]
    return struct.unpack(">II", raw[16:24])


km, kc = start_new_kernel(kernel_name="xsa", startup_timeout=60)


@case
def kernel_info_and_heartbeat():
    kc.kernel_info()
    r = kc.get_shell_msg(timeout=10)["content"]
    assert r["protocol_version"] == "5.3" and r["language_info"]["name"] == "lua", r
    assert r["implementation"] == "xsa", r
    assert kc.hb_channel.is_beating()


@case
def print_and_io_write_stream_to_the_cell():
    r, out = run("print('hi', 1, nil) io.write(1, ' ', 2.5, '\\n') io.stderr:write('warn\\n')")
    assert r["status"] == "ok", r
    streams = of(out, "stream")
    text = "".join(s["text"] for s in streams if s["name"] == "stdout")
    assert text == "hi\t1\tnil\n1 2.5\n", repr(text)
    assert any(s["name"] == "stderr" and s["text"] == "warn\n" for s in streams), streams


@case
def a_final_expression_is_shown_as_the_repl_shows_it():
    r, out = run("1 + 1")
    res = of(out, "execute_result")
    assert res and res[0]["data"]["text/plain"] == "2", out
    assert res[0]["execution_count"] == r["execution_count"]
    r2, out = run("local t = xsa.zeros(16, 64)\nt:shape()")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "xsa.size{16, 64}", out
    assert r2["execution_count"] == r["execution_count"] + 1


@case
def top_level_locals_live_on_in_later_cells():
    run("local a = 40\nlocal function twice(x) return 2 * x end\nfor i = 1, 2 do local hidden = i end")
    r, out = run("twice(a) + 2, hidden")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "82\tnil", out


@case
def an_error_shows_the_lua_traceback():
    r, out = run("local x = 1\nerror('boom')")
    assert r["status"] == "error" and "boom" in r["evalue"], r
    err = of(out, "error")[0]
    assert "In[" in err["evalue"] and ":2: boom" in err["evalue"], err
    assert any("stack traceback" in line for line in err["traceback"]), err
    r, out = run("x = = 1")
    assert r["status"] == "error" and "unexpected symbol" in r["evalue"], r


@case
def figures_display_inline_as_png():
    r, out = run("local fig = xsa.plot.figure{title = 'sq'}\n"
                 "fig:panel{xlabel = 'x'}:line({1, 2, 3}, {1, 4, 9}, {label = 'y'})\nfig:show()")
    assert r["status"] == "ok", r
    d = of(out, "display_data")
    assert d, out
    w, h = png_size(d[0]["data"]["image/png"])
    assert w > 100 and h > 100, (w, h)
    assert d[0]["data"]["text/plain"] == 'xsa.plot figure "sq" (1 panel)', d[0]["data"]["text/plain"]
    r, out = run("fig")
    assert png_size(of(out, "execute_result")[0]["data"]["image/png"])[0] > 100
    r, out = run("xsa.plot.show({1, 4, 9, 16})")
    assert of(out, "display_data"), out
    r, out = run("fig:show()")  # shows the figure, and returns nothing to echo
    assert of(out, "display_data") and not of(out, "execute_result"), out


@case
def results_show_as_results_and_help_knows_them():
    r, out = run("s = xsa.stats.paired_summary({4.0, 4.1, 4.2}, {3.9, 4.0, 4.1}, {resamples = 100})\ns")
    text = of(out, "execute_result")[0]["data"]["text/plain"]
    assert text.startswith("paired summary: XSA better by 2.44% (95% CI 2.29 to 2.59, N=3)"), text
    r, out = run("help(s)")
    assert r["status"] == "ok", r
    assert "a summary of xsa.stats.paired_summary" in "".join(m["text"] for m in of(out, "stream")), out


@case
def progress_is_one_display_updated_in_place():
    r, out = run("local bar = xsa.progress.new{label = 'train', total = 3}\n"
                 "for i = 1, 3 do bar:update(i, 'loss 1.0', 100) end")
    first, updates = of(out, "display_data"), of(out, "update_display_data")
    assert len(first) == 1 and updates, out
    did = first[0]["transient"]["display_id"]
    assert all(u["transient"]["display_id"] == did for u in updates)
    assert "3/3" in updates[-1]["data"]["text/plain"], updates
    assert not of(out, "stream"), "no stderr lines"


def interrupted(code, how):
    msg_id = run(code, wait=False)
    time.sleep(1.5)
    how()
    r, out = collect(msg_id, timeout=30)
    assert r["status"] == "error" and r["ename"] == "Interrupted", r
    r, out = run("'alive'")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "alive"


@case
def sigint_stops_a_lua_loop_and_a_coroutine():
    interrupted("while true do end", km.interrupt_kernel)
    interrupted("coroutine.wrap(function() while true do end end)()", km.interrupt_kernel)


@case
def interrupt_request_on_control_stops_a_loop():
    def send():
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.connect("%s://%s:%d" % (km.transport, km.ip, km.control_port))
        kc.session.send(sock, "interrupt_request", {})
        assert sock.poll(10000), "no interrupt_reply"
        _, rep = kc.session.recv(sock)
        sock.close(0)
        assert rep["msg_type"] == "interrupt_reply" and rep["content"]["status"] == "ok", rep
    interrupted("local a = xsa.rand(200, 200) while true do a:matmul(a) end", send)


@case
def completion_uses_the_repl_completion():
    kc.complete("x = xsa.gpt.lo", 14)
    r = kc.get_shell_msg(timeout=10)["content"]
    assert "xsa.gpt.load" in r["matches"] and r["cursor_start"] == 4 and r["cursor_end"] == 14, r


@case
def inspection_uses_help():
    kc.inspect("y = xsa.zeros(2)", 9)
    r = kc.get_shell_msg(timeout=10)["content"]
    assert r["found"] and "xsa.zeros(" in r["data"]["text/plain"], r
    kc.inspect("nothing_here_at_all", 3)
    assert not kc.get_shell_msg(timeout=10)["content"]["found"]


@case
def is_complete_knows_incomplete_statements():
    for code, want in [("for i = 1, 2 do", "incomplete"), ("x = {", "incomplete"), ("s = [[abc", "incomplete"),
                       ("x = 1", "complete"), ("x = = 1", "invalid")]:
        kc.is_complete(code)
        r = kc.get_shell_msg(timeout=10)["content"]
        assert r["status"] == want, (code, r)


@case
def a_badly_signed_message_is_dropped():
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.connect("%s://%s:%d" % (km.transport, km.ip, km.shell_port))
    s.send_multipart([b"<IDS|MSG>", b"0" * 64, b'{"msg_type":"execute_request","msg_id":"x"}', b"{}", b"{}",
                      b'{"code":"os.exit(3)"}'])
    s.send_multipart([b"garbage"])
    time.sleep(0.5)
    s.close(0)
    r, out = run("'still here'")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "still here"


class Dealer:
    """A raw DEALER on one of the kernel's ROUTER channels: sends frames as
    given, signs with the kernel's key when asked."""

    def __init__(self, port):
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect("%s://%s:%d" % (km.transport, km.ip, port))

    def frames(self, msg_type, body, **over):
        """[DELIM, sig, header, parent, metadata, content] of a signed message;
        `over` replaces serialized parts (header=, parent=, metadata=, content=)
        before signing."""
        msg = kc.session.msg(msg_type, body)
        f = kc.session.serialize(msg)
        for i, name in enumerate(["header", "parent", "metadata", "content"]):
            if name in over:
                f[2 + i] = over[name]
        f[1] = kc.session.sign(f[2:6])
        return f, msg["header"]["msg_id"]

    def ask(self, code, timeout=30):
        """A signed execute_request of code on this socket; its reply content.
        Messages sent before on this socket were handled before it."""
        f, msg_id = self.frames("execute_request", {"code": code, "silent": False, "store_history": True,
                                                    "user_expressions": {}, "allow_stdin": False})
        self.sock.send_multipart(f)
        while True:
            assert self.sock.poll(timeout * 1000), "no reply to " + code
            _, rep = kc.session.feed_identities(self.sock.recv_multipart())
            rep = kc.session.deserialize(rep)
            if rep["parent_header"].get("msg_id") == msg_id:
                return rep["content"]

    def close(self):
        self.sock.close(0)


KILL = '{"code":"os.exit(3)","silent":false,"allow_stdin":false}'


def mutations(d):
    """Generated hostile variants of one signed execute_request that would
    end the kernel if it ran: each must be dropped unanswered."""
    good, _ = d.frames("execute_request", {"code": "os.exit(3)", "silent": False})
    sig = good[1]
    out = [[good[0], b""] + good[2:],                           # no signature while a key is set
           [good[0], sig.upper()] + good[2:],                   # the right digest in other letters
           [good[0], sig[:-1]] + good[2:], [good[0], sig + b"0"] + good[2:],
           [good[0], b"0" * 64] + good[2:], [good[0], sig] + good[2:5],  # a part short
           good[1:], [b"<IDS|MSG >"] + good[1:],               # no delimiter
           [b"id"] * 17 + good,                                 # more identities than a reply can carry
           good + [b"{}"] * 30]                                 # more parts than a message has
    for i in range(2, 6):                                       # each signed part changed after signing
        for change in (b" ", b"\x00", b"\xff"):
            f = list(good)
            f[i] = f[i][:-1] + change + f[i][-1:]
            out.append(f)
    hostile = {"header": [b"[]", b'"x"', b"1", b"{", b'{"msg_type":3}', b'{"msg_id":"a"}', b"\xff\xfe"],
               "parent": [b"[]", b"null", b'{"msg_id":7}', b"{"], "metadata": [b"[]", b"0", b"{"],
               "content": [b"[]", b"null", b'"os.exit(3)"', b"{"]}
    for part, values in hostile.items():                        # correctly signed, wrong JSON
        for v in values:
            f, _ = d.frames("execute_request", {"code": "os.exit(3)"}, **{part: v})
            out.append(f)
    pad = b" " * (9 << 20)                                      # each part below the cap, together above it
    f, _ = d.frames("execute_request", {}, content=KILL.encode()[:-1] + b',"pad":"' + pad + b'"}',
                    metadata=b'{"pad":"' + pad + b'"}')
    out.append(f)
    return out


@case
def hostile_messages_are_dropped_unanswered():
    d = Dealer(km.shell_port)
    bad = mutations(d)
    for f in bad:
        d.sock.send_multipart(f)
    r = d.ask("'alive after %d'" % len(bad))
    assert r["status"] == "ok", r
    # nothing was answered but the last request
    assert not d.sock.poll(500), "a hostile message was answered"
    d.close()
    r, out = run("'still here'")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "still here"


@case
def a_replayed_signature_is_refused():
    d = Dealer(km.shell_port)
    f, _ = d.frames("execute_request", {"code": "replays = (replays or 0) + 1", "silent": False,
                                        "allow_stdin": False})
    for _ in range(3):
        d.sock.send_multipart(f)
    r = d.ask("replays")
    assert r["status"] == "ok", r
    d.close()
    r, out = run("replays")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "1", out


@case
def a_part_larger_than_the_cap_disconnects_its_sender_only():
    d = Dealer(km.shell_port)
    f, _ = d.frames("execute_request", {}, content=KILL.encode()[:-1] + b',"pad":"' + b"x" * (17 << 20) + b'"}')
    d.sock.send_multipart(f)
    time.sleep(0.5)
    d.close()
    r, out = run("'after a 17 MiB part'")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "after a 17 MiB part", out


@case
def control_requests_get_busy_and_idle():
    drain(kc.get_iopub_msg)
    d = Dealer(km.control_port)
    f, msg_id = d.frames("kernel_info_request", {})
    d.sock.send_multipart(f)
    assert d.sock.poll(10000), "no kernel_info_reply on control"
    d.close()
    states, deadline = [], time.time() + 30
    while states != ["busy", "idle"] and time.time() < deadline:
        m = kc.get_iopub_msg(timeout=30)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status":
            states.append(m["content"]["execution_state"])
    assert states == ["busy", "idle"], states


def utf8_replaced(raw):
    """What a front end must see for bytes raw: Python's own decoder with
    errors="replace" (one U+FFFD per maximal invalid subpart), NUL as \\0."""
    return raw.decode("utf-8", errors="replace").replace("\x00", "\\0")


@case
def nul_bytes_and_invalid_utf8_are_escaped_never_a_failed_cell():
    import random
    rng = random.Random(37)
    pieces = [b"a", b"\x00", b"\xff", b"\x80", b"\xc3", b"\xa9", b"\xe2\x82", b"\xac", b"\xed\xa0\x80",
              b"\xf0\x9f\x98", b"\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", "é€😀".encode(), b"\n", b"|"]
    raws = [b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8))) for _ in range(150)]
    lua = "".join("\\%d" % b for b in b"\x1e".join(raws))
    r, out = run('for s in ("%s"):gmatch("[^\\30]+") do io.write(s) end' % lua)
    assert r["status"] == "ok", r
    got = [s["text"] for s in of(out, "stream")]
    assert got == [utf8_replaced(x) for x in raws], [(a, utf8_replaced(b)) for a, b in zip(got, raws) if a != utf8_replaced(b)][:5]
    r, out = run('print("a\\0b\\255") io.stderr:write("\\0") return "x\\0\\255"')
    assert r["status"] == "ok", r
    assert [s["text"] for s in of(out, "stream")] == ["a\\0b\ufffd\n", "\\0"], of(out, "stream")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "x\\0\ufffd", out
    r, out = run('error("bad \\0 \\255 byte", 0)')
    assert r["status"] == "error" and r["evalue"] == "bad \\0 \ufffd byte", r


def interrupted_read():
    """A cell waiting in io.read, interrupted; the input_request it showed."""
    msg_id = kc.execute("return io.read()", allow_stdin=True)
    m = kc.get_stdin_msg(timeout=30)
    assert m["msg_type"] == "input_request", m
    km.interrupt_kernel()
    r, out = collect(msg_id, timeout=30)
    assert r["status"] == "error" and r["ename"] == "Interrupted", r
    return m


@case
def a_late_input_reply_never_reaches_a_later_cell():
    old = interrupted_read()
    late = lambda v: kc.stdin_channel.send(kc.session.msg("input_reply", {"value": v}, parent=old["header"]))
    late("late, before the next cell")
    msg_id = kc.execute("return io.read()", allow_stdin=True)
    new = kc.get_stdin_msg(timeout=30)
    assert new["msg_type"] == "input_request", new
    late("late, while the next cell waits")       # the same channel: it arrives first
    kc.stdin_channel.send(kc.session.msg("input_reply", {"value": "fresh"}, parent=new["header"]))
    r, out = collect(msg_id)
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "fresh", out


def answered(code, answers):
    """Runs code that reads, typing each answer into the input box it asks for."""
    msg_id = kc.execute(code, allow_stdin=True)
    for a in answers:
        m = kc.get_stdin_msg(timeout=30)
        assert m["msg_type"] == "input_request" and m["parent_header"]["msg_id"] == msg_id, m
        assert m["content"]["password"] is False, m
        kc.input(a)
    return collect(msg_id)


@case
def io_read_asks_the_front_end():
    r, out = answered('local name = io.read() print("hello " .. name)', ["Ada Lovelace"])
    assert r["status"] == "ok" and "hello Ada Lovelace\n" in "".join(o["text"] for o in of(out, "stream")), (r, out)
    r, out = answered('return io.read("n", "L", 3)', ["42.5", "two words", "abcdef"])
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "42.5\ttwo words\n\tabc", out
    r, out = answered('return io.stdin:read("l")', ["last"])
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "last", out
    r, out = answered('return io.read("n")', ["not a number"])
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "nil", out
    r, out = run('for l in io.lines() do end')
    assert r["status"] == "error" and "never gives" in r["evalue"], r
    r, out = run('return io.read("x")')
    assert r["status"] == "error" and "invalid format" in r["evalue"], r
    # files other than stdin read as they always do
    r, out = run('local p = os.tmpname() local f = io.open(p, "w") f:write("a\\nb\\n") f:close() '
                 'local t = {} for l in io.lines(p) do t[#t + 1] = l end os.remove(p) return table.concat(t, ",")')
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "a,b", (r, out)


@case
def io_read_without_stdin_fails_at_once():
    t = time.time()
    msg_id = kc.execute("return io.read()", allow_stdin=False)
    r, out = collect(msg_id, timeout=30)
    assert r["status"] == "error" and "allow_stdin false" in r["evalue"], r
    assert time.time() - t < 10, "no wait for an answer that cannot come"


@case
def an_interrupt_ends_a_wait_for_input():
    interrupted_read()
    r, out = run("'alive'")
    assert of(out, "execute_result")[0]["data"]["text/plain"] == "alive"


@case
def the_ipc_transport_names_endpoints_as_jupyter_does():
    from jupyter_client.manager import KernelManager
    path = os.path.join(TMP, "kipc")
    m = KernelManager(kernel_name="xsa", transport="ipc", ip=path)
    m.start_kernel()
    c = m.client()
    c.start_channels()
    try:
        c.wait_for_ready(timeout=60)
        msg_id = c.execute("6 * 7")
        got = None
        while got is None:
            msg = c.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_result":
                got = msg["content"]["data"]["text/plain"]
        assert got == "42", got
        assert os.path.exists("%s-%d" % (path, m.shell_port)), os.listdir(TMP)
    finally:
        c.stop_channels()
        m.shutdown_kernel(now=True)


@case
def restart_gives_a_fresh_state():
    run("survivor = 1")
    km.restart_kernel(now=False)
    kc.wait_for_ready(timeout=60)
    r, out = run("survivor")
    assert r["execution_count"] == 1 and of(out, "execute_result")[0]["data"]["text/plain"] == "nil", (r, out)


@case
def shutdown_ends_the_process():
    proc = km.provisioner.process if hasattr(km, "provisioner") and km.provisioner else km.kernel
    km.shutdown_kernel(now=False)
    assert not km.is_alive()
    assert proc.poll() == 0, proc.poll()


kc.stop_channels()
shutil.rmtree(TMP, ignore_errors=True)
print("kernel_protocol: %d passed, %d failed" % (passed, failed), flush=True)
os._exit(1 if failed else 0)  # skips jupyter_client's noisy finalizers
