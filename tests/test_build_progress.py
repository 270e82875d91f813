"""The build-stream parser, fed with streams recorded from the real classic builder (engine 20.10).

tests/data/build-streams/*.jsonl were recorded by driving ``APIClient.build(decode=True)`` on the
tiny bundle: ``success.jsonl`` a build with most steps cached, ``failing.jsonl`` the same bundle with
``exit 7`` appended to its RUN step.
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from envbuild.image.build import _failure_message
from envbuild.image.progress import BuildStream

STREAMS = Path(__file__).parent / "data" / "build-streams"


def replay(name: str) -> tuple[BuildStream, str]:
    ticks = itertools.count()
    log = io.StringIO()
    stream = BuildStream(log, clock=lambda: float(next(ticks)))
    for line in (STREAMS / f"{name}.jsonl").read_text().splitlines():
        stream.feed(json.loads(line))
    stream.close()
    return stream, log.getvalue()


def test_successful_stream() -> None:
    stream, log = replay("success")
    assert stream.error is None
    assert stream.image_id is not None and stream.image_id.startswith("sha256:")
    assert [s.number for s in stream.steps] == list(range(1, 17))
    assert {s.total for s in stream.steps} == {16}
    assert stream.steps[2].instruction == "COPY certs/ /usr/local/share/ca-certificates/envbuild/"
    assert stream.steps[2].cached
    assert not stream.steps[1].cached  # FROM is never "Using cache"
    assert all(s.finished is not None and s.seconds > 0 for s in stream.steps)
    assert "Step 16/16 : CMD" in log and "Successfully built" in log


def test_failing_stream_names_the_step_and_its_output() -> None:
    stream, log = replay("failing")
    step = stream.failing_step()
    assert step is not None
    assert (step.number, step.total) == (6, 16)
    assert step.instruction.startswith("RUN mkdir -p /opt/venv")
    assert stream.error is not None and "returned a non-zero code: 7" in stream.error
    assert stream.tail(step) == ["tiny: 0 wheel(s) installed", "tiny: compiling the impossible"]
    assert "ERROR: The command" in log
    message = _failure_message(stream, Path("/b/build-x.log"))
    assert message.splitlines()[0].startswith("build failed at step 6/16: RUN mkdir -p /opt/venv")
    assert "  | tiny: compiling the impossible" in message
    assert message.endswith("full log: /b/build-x.log")
    assert "hint:" not in message  # the base-image hint is only for a failing FROM


def test_failing_from_hints_at_a_local_base_image() -> None:
    stream = BuildStream()
    stream.feed({"stream": "Step 1/3 : ARG BASE_IMAGE=debian:12\n"})
    stream.feed({"stream": "Step 2/3 : FROM ${BASE_IMAGE} AS builder\n"})
    stream.feed({"error": 'Get "https://registry-1.docker.io/v2/": dial tcp: no such host'})
    message = _failure_message(stream, Path("x.log"))
    assert "build failed at step 2/3: FROM ${BASE_IMAGE} AS builder" in message
    assert "scripts/base-image.sh" in message and "--base-image" in message


def test_lines_split_across_chunks_and_ansi_codes() -> None:
    stream = BuildStream()
    for text in ["Step 1/2 : RUN x\n", "\x1b[1mpart", "ial\x1b[0m line\nprogress 10%\rprogress 100%\n"]:
        stream.feed({"stream": text})
    stream.feed({"error": "boom"})
    step = stream.failing_step()
    assert step is not None and step.lines == ["partial line", "progress 100%"]
    assert stream.error == "boom"


def test_error_before_any_step() -> None:
    stream = BuildStream()
    stream.feed({"errorDetail": {"message": "dockerfile parse error line 3: unknown instruction: FORM"}})
    assert stream.failing_step() is None
    assert "before any step ran: dockerfile parse error" in _failure_message(stream, Path("x.log"))


@pytest.mark.parametrize(
    "chunk", [{"aux": {"ID": "sha256:abc"}}, {"stream": "Successfully built 0123abcd\n"}]
)
def test_image_id_sources(chunk: dict[str, object]) -> None:
    stream = BuildStream()
    stream.feed({"stream": "Step 1/1 : FROM x\n"})
    stream.feed(chunk)
    assert stream.image_id in ("sha256:abc", "0123abcd")
