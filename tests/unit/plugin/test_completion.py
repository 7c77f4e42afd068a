"""``kubectl_complete-lws``: the candidates for each position of a command line, as kubectl
passes it (the plugin's words, the last one being completed), and the names read from a
kubeconfig and an API server, or none, silently, when they cannot be read."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from lws_operator.plugin import completion
from lws_operator.plugin.completion import FILES, NO_FILES, Cluster, Scope, complete


class FakeCluster(Cluster):
    """Names as the cluster would give them, each recording the scope it was asked in."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Scope]] = []

    def contexts(self, scope: Scope) -> list[str]:
        self.asked.append(("contexts", scope))
        return ["kind-lws", "prod"]

    def namespaces(self, scope: Scope) -> list[str]:
        self.asked.append(("namespaces", scope))
        return ["default", "serving"]

    def sets(self, scope: Scope, kinds: Sequence[str] = ("leaderworkerset",)) -> list[str]:
        self.asked.append(("sets", scope))
        self.kinds = tuple(kinds)
        return ["llama", "mistral"] + (["disagg"] if "disaggregatedset" in kinds else [])

    def groups(self, scope: Scope, name: str) -> list[str]:
        self.asked.append((f"groups of {name}", scope))
        return ["0", "1", "2"]


def names(candidates: list[str]) -> list[str]:
    return [c.split("\t")[0] for c in candidates]


def test_subcommands_with_their_help_and_no_file_names() -> None:
    candidates, directive = complete([""], FakeCluster())
    assert names(candidates) == ["tree", "why", "plan", "rollout", "recover", "restart"]
    assert candidates[0] == ("tree\tshow LeaderWorkerSets as set → groups → pods "
                             "(DisaggregatedSets: → role sets)")
    assert directive == NO_FILES
    assert complete(["re"], FakeCluster()) == (
        ["recover\trecover a group whose restart budget is exhausted",
         "restart\trecreate one group (delete its leader, as the controller does)"], NO_FILES)


def test_no_words_at_all_is_the_first_word_empty() -> None:
    assert complete([], FakeCluster()) == complete([""], FakeCluster())


def test_flags_of_the_subcommand_including_the_global_ones() -> None:
    candidates, directive = complete(["tree", "--"], FakeCluster())
    assert names(candidates) == ["--help", "--kind", "--watch", "--output", "--namespace",
                                 "--all-namespaces", "--context", "--kubeconfig"]
    assert directive == NO_FILES
    top = names(complete(["--"], FakeCluster())[0])
    assert "--version" in top
    assert "--watch" not in top


def test_fixed_choices_of_a_flag() -> None:
    assert complete(["why", "x", "-o", ""], FakeCluster()) == (["text", "json", "yaml"], NO_FILES)
    assert complete(["tree", "--output", "y"], FakeCluster()) == (["yaml"], NO_FILES)
    assert complete(["tree", "--output=j"], FakeCluster()) == (["--output=json"], NO_FILES)
    assert complete(["plan", "x", "--ready-order", ""], FakeCluster())[0] == ["batch", "one"]


def test_set_names_in_the_namespace_and_context_typed_before() -> None:
    cluster = FakeCluster()
    assert complete(["-n", "serving", "--context", "prod", "why", "l"], cluster) == (
        ["llama"], NO_FILES)
    assert cluster.asked == [("sets", Scope(namespace="serving", context="prod"))]

    cluster = FakeCluster()
    complete(["tree", "-A", "--kubeconfig=/k", "-nserving", ""], cluster)
    assert cluster.asked == [("sets", Scope("serving", None, "/k", all_namespaces=True))]


def test_the_nested_rollout_subcommands_and_their_flags() -> None:
    candidates, directive = complete(["rollout", ""], FakeCluster())
    assert "status" in names(candidates)  # beside the other rollout subcommands
    assert "status\twait for a rollout to complete, printing its progress" in candidates
    assert "tree" not in names(candidates)
    assert directive == NO_FILES
    assert complete(["rollout", "st"], FakeCluster())[0] == [
        "status\twait for a rollout to complete, printing its progress"]
    assert names(complete(["rollout", "status", "--"], FakeCluster())[0])[:4] == [
        "--help", "--timeout", "--watch", "--kind"]
    assert complete(["rollout", "status", "x", "--watch="], FakeCluster()) == (
        ["--watch=true", "--watch=false"], NO_FILES)
    assert complete(["rollout", "status", "x", "--kind", "d"], FakeCluster()) == (
        ["disaggregatedset"], NO_FILES)


@pytest.mark.parametrize(("words", "kinds"), [
    (["tree", ""], ("leaderworkerset", "disaggregatedset")),
    (["why", ""], ("leaderworkerset", "disaggregatedset")),
    (["plan", ""], ("leaderworkerset", "disaggregatedset")),
    (["rollout", "status", ""], ("leaderworkerset", "disaggregatedset")),
    (["rollout", "status", "--kind", "disaggregatedset", ""], ("disaggregatedset",)),
    (["tree", "--kind=leaderworkerset", ""], ("leaderworkerset",)),
    (["recover", ""], ("leaderworkerset",)),
    (["restart", ""], ("leaderworkerset",)),
])
def test_disaggregatedset_names_where_the_subcommand_takes_one(
        words: list[str], kinds: tuple[str, ...]) -> None:
    cluster = FakeCluster()
    candidates, _ = complete(words, cluster)
    assert cluster.kinds == kinds
    assert ("disagg" in candidates) == ("disaggregatedset" in kinds)


def test_group_indices_of_the_set_named_before() -> None:
    cluster = FakeCluster()
    assert complete(["restart", "llama", ""], cluster) == (["0", "1", "2"], NO_FILES)
    assert cluster.asked[0][0] == "groups of llama"
    assert complete(["why", "llama", "1"], FakeCluster()) == (["1"], NO_FILES)
    # recover takes two positionals only: nothing after them
    assert complete(["recover", "llama", "0", ""], FakeCluster()) == ([], NO_FILES)


def test_namespaces_and_contexts_as_flag_values() -> None:
    assert complete(["-n", ""], FakeCluster()) == (["default", "serving"], NO_FILES)
    assert complete(["tree", "--namespace", "s"], FakeCluster()) == (["serving"], NO_FILES)
    assert complete(["--context", ""], FakeCluster()) == (["kind-lws", "prod"], NO_FILES)


def test_file_flags_leave_the_completion_to_the_shell() -> None:
    assert complete(["--kubeconfig", ""], FakeCluster()) == ([], FILES)
    assert complete(["plan", "x", "-f", ""], FakeCluster()) == ([], FILES)


def test_flags_without_fixed_values_complete_nothing() -> None:
    assert complete(["plan", "x", "--replicas", ""], FakeCluster()) == ([], NO_FILES)


def test_main_prints_one_candidate_a_line_then_the_directive(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert completion.main(["why", "x", "-o", "j"]) == 0
    assert capsys.readouterr().out == "json\n:4\n"


# The names from a real kubeconfig and API server (a local HTTP one).

SETS = {"items": [{"metadata": {"name": "llama"}}, {"metadata": {"name": "gemma"}}]}


class Api(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Api.paths.append(self.path)
        answers = {
            "/apis/leaderworkerset.x-k8s.io/v1/namespaces/team/leaderworkersets": SETS,
            "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets": SETS,
            "/apis/leaderworkerset.x-k8s.io/v1/namespaces/team/leaderworkersets/llama":
                {"metadata": {"name": "llama"}, "spec": {"replicas": 3}},
            "/api/v1/namespaces": {"items": [{"metadata": {"name": "team"}}]},
            "/apis/disaggregatedset.x-k8s.io/v1/namespaces/team/disaggregatedsets":
                {"items": [{"metadata": {"name": "disagg"}}, {"metadata": {"name": "llama"}}]},
            "/apis/disaggregatedset.x-k8s.io/v1/namespaces/team/disaggregatedsets/disagg":
                {"metadata": {"name": "disagg"},
                 "spec": {"roles": [{"name": "prefill"}, {"name": "decode"}]}},
        }
        found = answers.get(self.path.split("?")[0])
        body = json.dumps(found or {"kind": "Status", "code": 404}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dev",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u",
                                                 "namespace": "team"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.fixture
def api() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Api.paths = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_names_from_the_kubeconfig_and_the_api_server(api: str, tmp_path: Path) -> None:
    scope = Scope(kubeconfig=str(kubeconfig(tmp_path / "config", api)))
    cluster = Cluster()
    assert cluster.contexts(scope) == ["dev", "other"]
    assert cluster.sets(scope) == ["gemma", "llama"]  # in the context's namespace
    assert cluster.groups(scope, "llama") == ["0", "1", "2"]
    assert cluster.groups(scope, "absent") == []
    assert cluster.namespaces(scope) == ["team"]
    both = ("leaderworkerset", "disaggregatedset")
    assert cluster.sets(scope, both) == ["disagg", "gemma", "llama"]
    assert cluster.sets(scope, ("disaggregatedset",)) == ["disagg", "llama"]
    assert cluster.groups(scope, "disagg") == ["prefill", "decode"]  # a set's roles
    scope.all_namespaces = True
    assert cluster.sets(scope, both) == ["gemma", "llama"]  # no DisaggregatedSet API there
    assert cluster.sets(scope) == ["gemma", "llama"]
    assert Api.paths[-1].startswith("/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets")


def test_no_kubeconfig_or_no_server_is_no_names_said_nowhere(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    cluster = Cluster()
    missing = Scope(kubeconfig=str(tmp_path / "absent"))
    assert (cluster.contexts(missing), cluster.sets(missing)) == ([], [])
    # a port nothing listens on: refused at once
    down = Scope(kubeconfig=str(kubeconfig(tmp_path / "config", "http://127.0.0.1:1")))
    started = time.monotonic()
    assert cluster.sets(down) == []
    assert time.monotonic() - started < completion.CLUSTER_DEADLINE + 1
    assert completion.main(["--kubeconfig", str(down.kubeconfig), "why", ""]) == 0
    out, err = capfd.readouterr()
    assert (out, err) == (":4\n", "")
