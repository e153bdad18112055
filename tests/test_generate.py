"""Generation against a fake OpenAI-compatible server on 127.0.0.1: retries, resume, extraction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.errors import GenerationError, UsageError
from coderun.generate import Endpoint, GenerationConfig, GenerationRequest, RetryPolicy, get_provider
from coderun.generate.extract import Extraction, assemble_solution, extract_code
from coderun.generate.records import GeneratedSample, raw_path_for
from coderun.generate.runner import run_generation
from coderun.prompts.records import ChatMessage, PromptRecord, write_prompts
from tests.fake_openai import FakeOpenAI, last_user_message

FAST = dict(base_delay=0.001, max_delay=0.01)


def _prompt(name: str, indent: int = 0) -> PromptRecord:
    pad = " " * indent
    header = f'{pad}def {name}(x):\n{pad}    """Return x doubled."""\n'
    return PromptRecord(
        prompt_id=f"proj/m.py::{name}@none:original", task_id=f"proj/m.py::{name}", project="proj",
        level="self_contained", file="m.py", qualname=name, name=name, context="none", docstring="original",
        prompt=header, messages=[ChatMessage(role="user", content=f"Complete {name}:\n{header}")],
        header=header, indent=indent).with_hash()


def _answer_by_name(endpoint: str, body: dict) -> str:
    """Chat: prose + a fenced block defining the function named in the prompt; completion: a body."""
    if endpoint == "completion":
        return "    return x * 2\n\ndef unrelated():\n    pass\n"
    name = last_user_message(body).split("Complete ", 1)[1].split(":", 1)[0]
    return f"Sure! Here it is:\n\n```python\ndef {name}(x):\n    return x * 2\n```\n\nThis doubles x."


def _provider(fake: FakeOpenAI, sleeps: list[float] | None = None, **policy):
    record = sleeps.append if sleeps is not None else (lambda s: None)
    return get_provider("openai", base_url=fake.base_url, api_key="sk-test",
                        retry=RetryPolicy(sleep=record, **{**FAST, **policy}))


def _samples(path: Path) -> list[GeneratedSample]:
    return [GeneratedSample.model_validate_json(line) for line in path.read_text().splitlines()]


# --- extraction ----------------------------------------------------------------------------------------

def test_extract_from_markdown_fence_in_prose():
    answer = "Here you go:\n```python\nimport os\n\ndef f(a):\n    return os.sep + a\n```\nDone."
    got = extract_code(answer, "f")
    assert got.how is Extraction.FENCED
    assert got.code == "import os\n\ndef f(a):\n    return os.sep + a\n"   # imports are the splicer's


def test_extract_prefers_the_block_that_defines_the_target():
    answer = "Usage:\n```python\nprint(f(1))\n```\nCode:\n```\ndef f(a):\n    return a\n```\n"
    assert extract_code(answer, "f").code == "def f(a):\n    return a\n"


def test_extract_indented_block_is_dedented():
    answer = "```python\n    @staticmethod\n    def f(a):\n        return a\n```"
    assert extract_code(answer, "f").code == "@staticmethod\ndef f(a):\n    return a\n"


def test_extract_unterminated_fence_of_a_truncated_answer():
    got = extract_code("```python\ndef f(a):\n    return a", "f")
    assert got.how is Extraction.FENCED and got.code == "def f(a):\n    return a\n"


def test_generation_and_splicing_take_the_same_tilde_fenced_block():
    """Generation once accepted only backtick fences while the splicer also took ~~~: one extractor now."""
    from coderun.runner.splice import extract_code as splice_extract

    answer = "Sure:\n~~~python\ndef f(a):\n    return a\n~~~\nBye."
    got = extract_code(answer, "f")
    assert got.how is Extraction.FENCED and got.code == "def f(a):\n    return a\n"
    assert splice_extract(answer, "f")[0] == got.code


def test_extract_def_from_plain_prose():
    answer = "The function is\n@cache\ndef f(a):\n    b = a\n    return b\nand that is all.\n"
    got = extract_code(answer, "f")
    assert got.how is Extraction.PROSE
    assert got.code == "@cache\ndef f(a):\n    b = a\n    return b\n"


def test_extract_bare_code_answer():
    got = extract_code("def f(a):\n    return a\n", "f")
    assert got.how is Extraction.WHOLE and got.code == "def f(a):\n    return a\n"


def test_extract_nothing_when_the_answer_has_no_code():
    got = extract_code("I cannot help with that.", "f")
    assert got.how is Extraction.NONE and got.code == ""


def test_completion_is_cut_where_the_method_body_ends():
    header = '    def f(self):\n        """Doc."""\n'
    completion = "        return 1\n\n    def g(self):\n        return 2\n"
    assert assemble_solution(header, completion, 4) == 'def f(self):\n    """Doc."""\n    return 1\n'


# --- the provider: retries, timeouts, fatal errors ------------------------------------------------------

def _chat_request() -> GenerationRequest:
    return GenerationRequest(endpoint=Endpoint.CHAT, model="m", messages=(("user", "Complete f:"),))


def test_retries_429_500_malformed_and_empty_then_succeeds_honouring_retry_after():
    sleeps: list[float] = []
    with FakeOpenAI(retry_after="3") as fake, _provider(fake, sleeps) as p:
        fake.fault("429", "500", "malformed", "empty")
        gen = p.generate(_chat_request())
    assert gen.attempts == 5 and "def f" in gen.text
    assert len(fake.requests) == 5 and len(sleeps) == 4
    assert sleeps[0] >= 3.0                      # the server's Retry-After, not the 1 ms backoff
    assert all(s <= 0.01 for s in sleeps[1:])    # jittered backoff, capped


def test_http_date_retry_after_is_understood():
    sleeps: list[float] = []
    with FakeOpenAI(retry_after="Wed, 21 Oct 2015 07:28:00 GMT") as fake, _provider(fake, sleeps) as p:
        fake.fault("429")
        p.generate(_chat_request())
    assert sleeps[0] <= 0.01                     # a date in the past means: retry now


def test_request_timeout_is_retried():
    with FakeOpenAI(hang_seconds=1.0) as fake, _provider(fake, timeout=0.2) as p:
        fake.fault("hang")
        gen = p.generate(_chat_request())
    assert gen.attempts == 2


def test_gives_up_after_max_attempts():
    with FakeOpenAI() as fake, _provider(fake, max_attempts=3) as p:
        fake.fault("503", "503", "503", "503")
        with pytest.raises(GenerationError, match="gave up after 3 attempts.*HTTP 503"):
            p.generate(_chat_request())
    assert len(fake.requests) == 3


def test_unauthorized_is_not_retried():
    with FakeOpenAI() as fake, _provider(fake) as p:
        fake.fault("401")
        with pytest.raises(GenerationError, match="HTTP 401") as e:
            p.generate(_chat_request())
    assert len(fake.requests) == 1 and "OPENAI_API_KEY" in (e.value.hint or "")


def test_unknown_provider_fails_loudly():
    with pytest.raises(UsageError, match="unknown provider 'nope'; one of: openai"):
        get_provider("nope")


# --- the runner: samples, raw responses, resume -------------------------------------------------------

def test_chat_run_writes_samples_with_metadata_and_raw_responses(tmp_path):
    out = tmp_path / "samples.jsonl"
    prompts = [_prompt("double"), _prompt("twice")]
    config = GenerationConfig(model="fake-model", n=3, concurrency=3, temperature=0.2)
    with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
        fake.fault("429", "500", "malformed")
        summary = run_generation(prompts, p, config, out)
    assert (summary.written, summary.retries, summary.errors) == (6, 3, [])
    samples = _samples(out)
    assert sorted((s.task_id, s.index) for s in samples) == [
        ("proj/m.py::double", i) for i in range(3)] + [("proj/m.py::twice", i) for i in range(3)]
    s = next(s for s in samples if s.task_id == "proj/m.py::twice")
    assert s.solution == "def twice(x):\n    return x * 2\n" and s.extraction == "fenced"
    assert s.raw.startswith("Sure! Here it is")
    assert (s.model, s.variant, s.temperature, s.endpoint) == ("fake-model", "none:original", 0.2, "chat")
    assert s.prompt_hash == prompts[1].prompt_hash and len(s.prompt_hash) == 16
    raws = [json.loads(line) for line in raw_path_for(out).read_text().splitlines()]
    assert len(raws) == 6 and raws[0]["response"]["id"] == "cmpl-fake"
    assert all(r["authorization"] == "Bearer sk-test" for r in fake.requests)


def test_completion_run_assembles_header_and_continuation(tmp_path):
    out = tmp_path / "samples.jsonl"
    config = GenerationConfig(model="m", n=1, endpoint=Endpoint.COMPLETION)
    with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
        run_generation([_prompt("double")], p, config, out)
    [s] = _samples(out)
    assert s.raw == "    return x * 2\n\ndef unrelated():\n    pass\n"
    assert s.solution == 'def double(x):\n    """Return x doubled."""\n    return x * 2\n'
    body = fake.requests[0]["body"]
    assert body["prompt"] == _prompt("double").prompt and "\ndef " in body["stop"]


def test_resume_requests_only_missing_samples_and_drops_a_half_written_line(tmp_path):
    out = tmp_path / "samples.jsonl"
    prompts = [_prompt("double"), _prompt("twice")]
    with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
        run_generation(prompts, p, GenerationConfig(model="m", n=2), out)
        with out.open("a") as f:
            f.write('{"task_id": "proj/m.py::double", "prompt_id": "cut sh')   # a crash mid-write
        fake.requests.clear()
        summary = run_generation(prompts, p, GenerationConfig(model="m", n=3), out)
    assert (summary.already, summary.written) == (4, 2)
    assert sorted(r["body"]["messages"][0]["content"][:14] for r in fake.requests) == [
        "Complete doubl", "Complete twice"]
    assert sorted((s.prompt_id.split("::")[1], s.index) for s in _samples(out)) == [
        (name, i) for name in ("double@none:original", "twice@none:original") for i in range(3)]


def test_resume_refuses_to_mix_settings(tmp_path):
    out = tmp_path / "samples.jsonl"
    with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
        run_generation([_prompt("double")], p, GenerationConfig(model="m", n=1), out)
        with pytest.raises(UsageError, match="was generated with model"):
            run_generation([_prompt("double")], p, GenerationConfig(model="other", n=1), out)


def test_a_fatal_error_stops_the_run_and_keeps_finished_samples(tmp_path):
    out = tmp_path / "samples.jsonl"
    prompts = [_prompt(f"f{i}") for i in range(5)]
    with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
        fake.fault("ok", "401")
        summary = run_generation(prompts, p, GenerationConfig(model="m", n=1, concurrency=1), out)
        assert summary.written == 1 and "HTTP 401" in summary.errors[0]
        assert len(fake.requests) == 2                     # nothing requested after the fatal error
        summary = run_generation(prompts, p, GenerationConfig(model="m", n=1, concurrency=2), out)
    assert (summary.already, summary.written, summary.errors) == (1, 4, [])


# --- the command --------------------------------------------------------------------------------------

def test_generate_command_reads_the_key_from_the_named_variable(tmp_path, monkeypatch):
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out" / "samples.jsonl"
    write_prompts([_prompt("double")], prompts)
    monkeypatch.setenv("MY_KEY", "sk-mine")
    with FakeOpenAI(_answer_by_name) as fake:
        result = CliRunner().invoke(app, [
            "generate", "--prompts", str(prompts), "--model", "m", "--base-url", fake.base_url, "-n", "2",
            "--api-key-env", "MY_KEY", "-o", str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["written"] == 2
    assert {r["authorization"] for r in fake.requests} == {"Bearer sk-mine"}


def test_generate_command_exits_with_the_generation_code_on_failure(tmp_path):
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "samples.jsonl"
    write_prompts([_prompt("double")], prompts)
    with FakeOpenAI() as fake:
        fake.fault("401")
        result = CliRunner().invoke(app, [
            "generate", "--prompts", str(prompts), "--model", "m", "--base-url", fake.base_url, "-n", "1",
            "-o", str(out), "-q"])
    assert result.exit_code == GenerationError.exit_code
    assert "HTTP 401" in result.output


def test_generate_command_rejects_a_missing_prompts_file(tmp_path):
    result = CliRunner().invoke(app, ["generate", "--prompts", str(tmp_path / "nope.jsonl"), "--model", "m",
                                      "--base-url", "http://127.0.0.1:9/v1", "-o", str(tmp_path / "s.jsonl")])
    assert result.exit_code == UsageError.exit_code and "prompts file not found" in result.output


def test_samples_of_both_endpoints_are_readable_by_eval(tmp_path):
    """eval takes exactly one of solution/completion per line: a sample with both was read as malformed."""
    from coderun.evaluation.samples import TaskRef, read_samples

    for endpoint in Endpoint:
        out = tmp_path / f"{endpoint.value}.jsonl"
        with FakeOpenAI(_answer_by_name) as fake, _provider(fake) as p:
            run_generation([_prompt("double")], p, GenerationConfig(model="m", n=2, endpoint=endpoint), out)
        loaded = read_samples(out, lambda task_id: TaskRef(task_id, ""))
        assert loaded.problems == [] and len(loaded.samples) == 2
        assert loaded.samples[0].code.startswith("def double(x):")
        assert loaded.samples[0].metadata["variant"] == "none:original"
