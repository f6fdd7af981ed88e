"""memq.llm: the OpenAI-compatible client against a local fake server, validation, and (slow) SmolLM2."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from memq.errors import MemQError
from memq.llm import LLM, LLMError, LocalLLM, OpenAIChat, resolve_model
from memq.llm.base import cut_at_stop


class _Handler(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict, str | None]] = []
    fail_first = 0

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append((self.path, body, self.headers.get("Authorization")))
        if _Handler.fail_first > 0:
            _Handler.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        if self.path.endswith("/chat/completions"):
            text = "echo: " + body["messages"][-1]["content"] + "\nSTOP here"
            reply = {"choices": [{"message": {"content": text}}], "usage": {"completion_tokens": 3}}
        else:
            reply = {"choices": [{"text": "raw: " + body["prompt"]}], "usage": {"completion_tokens": 2}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # silence
        pass


@pytest.fixture()
def server():
    _Handler.seen = []
    _Handler.fail_first = 0
    httpd = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_openai_chat_generates_cuts_stop_and_counts(server, monkeypatch):
    monkeypatch.setenv("MEMQ_TEST_KEY", "sekret")
    llm = OpenAIChat(server, "fake-model", api_key_env="MEMQ_TEST_KEY")
    out = llm.generate(["a", "b", "c"], max_new_tokens=5, stop=["STOP"])
    assert out == ["echo: a", "echo: b", "echo: c"]
    assert llm.calls == 3 and llm.tokens == 9
    path, body, auth = _Handler.seen[0]
    assert path == "/v1/chat/completions"
    assert body["max_tokens"] == 5 and body["temperature"] == 0 and body["stop"] == ["STOP"]
    assert auth == "Bearer sekret"
    assert "sekret" not in json.dumps(vars(llm), default=str)
    assert isinstance(llm, LLM)


def test_openai_plain_completion_and_retry(server):
    _Handler.fail_first = 1
    llm = OpenAIChat(server, "fake", api_key_env="MEMQ_NO_SUCH_KEY", retries=2, workers=1)
    assert llm.generate(["x"], chat=False) == ["raw: x"]
    assert [p for p, _, _ in _Handler.seen] == ["/v1/completions", "/v1/completions"]
    assert _Handler.seen[-1][2] is None  # no key in the environment: no header


def test_openai_errors_are_memq_errors(server):
    _Handler.fail_first = 5
    llm = OpenAIChat(server, "fake", retries=0)
    with pytest.raises(LLMError, match="HTTP 503"):
        llm.generate(["x"])
    with pytest.raises(LLMError, match="base_url"):
        OpenAIChat("localhost:8000", "m")


def test_validation_names_the_bad_value():
    with pytest.raises(LLMError, match="device"):
        LocalLLM("smollm2", device="tpu")
    with pytest.raises(LLMError, match="max_new_tokens"):
        LocalLLM("smollm2").generate(["x"], max_new_tokens=0)
    with pytest.raises(LLMError, match="prompts"):
        LocalLLM("smollm2").generate("just a string")  # type: ignore[arg-type]
    with pytest.raises(MemQError, match="unknown model"):
        resolve_model("/no/such/model")
    assert LocalLLM("smollm2").generate([]) == []


def test_cut_at_first_stop():
    assert cut_at_stop("a. b\nc", ["\n", "."]) == "a"
    assert cut_at_stop("abc", ["x"]) == "abc"
    assert cut_at_stop("abc", None) == "abc"


@pytest.mark.slow
def test_smollm2_greedy_batched_is_deterministic_and_padding_free():
    llm = LocalLLM("smollm2")
    prompts = ["What is the capital of France?", "Name a colour.", "Count: 1, 2,"]
    batched = llm.generate(prompts, max_new_tokens=12, stop=["\n"])
    single = [llm.generate([p], max_new_tokens=12, stop=["\n"])[0] for p in prompts]
    assert batched == single  # left padding does not change greedy output
    assert "Paris" in batched[0]
    assert all("\n" not in t for t in batched)
    assert llm.calls == 6 and llm.tokens > 0
    assert resolve_model("smollm2").directory.joinpath("model.safetensors").exists()
