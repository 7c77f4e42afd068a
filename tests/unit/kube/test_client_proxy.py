"""The API client's proxy is settled once, from the kubeconfig or the environment
(``kube.client.resolve_proxy``), and requests then go through it without aiohttp looking the
environment up again. The proxy here is a real local server: it answers the absolute-form
requests a client sends a proxy for a plain-HTTP server, and records the CONNECT a client sends
for an HTTPS one (then refuses it: there is no API server behind). The API server's name does
not resolve, so whatever reaches the proxy can only have come through it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kubernetes.aio import client

from lws_operator.kube.client import KubeClient, resolve_proxy

SERVER = "http://kube.invalid:8080"
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY",
                   "https_proxy", "http_proxy", "no_proxy", "all_proxy")


class Proxy:
    """Records the request line and Proxy-Authorization of what reaches it; answers a request
    for a plain-HTTP server as an API server would, and refuses a CONNECT."""

    ANSWER = b'{"kind": "APIVersions", "versions": ["v1"]}'

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        self.seen.append((head[0], headers.get("Proxy-Authorization")))
        if head[0].startswith("CONNECT "):
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (len(self.ANSWER), self.ANSWER))
        await writer.drain()
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    recorder = Proxy()
    server = await asyncio.start_server(recorder.handle, "127.0.0.1", 0)
    recorder.url = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    yield recorder
    server.close()
    await server.wait_closed()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent")


def configuration(host: str = SERVER) -> client.Configuration:
    conf = client.Configuration()
    conf.host = host
    return conf


async def test_the_environment_proxy_is_used_and_not_looked_up_again(
        proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.url}")
    conf = configuration()
    resolve_proxy(conf)
    assert conf.proxy == f"http://{proxy.url}"
    assert conf.client_session_kwargs == {"trust_env": False}
    monkeypatch.delenv("HTTP_PROXY")  # settled: the environment is not read per request
    kube = KubeClient(client.ApiClient(configuration=conf))
    try:
        answer = await kube.request("GET", "/api")
    finally:
        await kube.close()
    assert answer["kind"] == "APIVersions"
    assert proxy.seen == [(f"GET {SERVER}/api HTTP/1.1", None)]


async def test_an_https_server_is_reached_through_the_proxy_with_its_credentials(
        proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://operator:secret@{proxy.url}")
    conf = configuration("https://kube.invalid:6443")
    resolve_proxy(conf)
    assert conf.proxy == f"http://{proxy.url}"
    kube = KubeClient(client.ApiClient(configuration=conf))
    try:
        with pytest.raises(aiohttp.ClientHttpProxyError):  # the test proxy refuses tunnels
            await kube.request("GET", "/api")
    finally:
        await kube.close()
    assert proxy.seen == [("CONNECT kube.invalid:6443 HTTP/1.1",
                           aiohttp.encode_basic_auth("operator", "secret"))]


async def test_no_proxy_exempts_the_server(proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.url}")
    monkeypatch.setenv("NO_PROXY", "localhost,kube.invalid")
    conf = configuration()
    resolve_proxy(conf)
    assert conf.proxy is None
    kube = KubeClient(client.ApiClient(configuration=conf))
    try:
        with pytest.raises(aiohttp.ClientConnectorError):  # direct, to a name not resolving
            await kube.request("GET", "/api", timeout=5)
    finally:
        await kube.close()
    assert proxy.seen == []


async def test_a_proxy_for_another_scheme_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    conf = configuration()  # an http:// server: HTTPS_PROXY does not apply
    resolve_proxy(conf)
    assert conf.proxy is None


def test_the_kubeconfig_proxy_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    conf = configuration("https://kube.invalid:6443")
    conf.proxy = "http://kubeconfig-proxy.invalid:8888"  # proxy-url of the kubeconfig
    resolve_proxy(conf)
    assert conf.proxy == "http://kubeconfig-proxy.invalid:8888"
    assert conf.proxy_headers is None
