"""The configuration's ``tls`` section on the webhook server's TLS context (admission.server)."""

from __future__ import annotations

import ssl

from lws_operator.admission.server import ServingTLS
from lws_operator.api.config import load

HEAD = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


def tls_context(section: str) -> ssl.SSLContext:
    tls = load(HEAD + section).config.tls
    assert tls is not None
    return ServingTLS(tls.minVersion, tls.openssl_ciphers()).context


def test_default_is_tls12() -> None:
    assert ServingTLS().context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_min_version_13() -> None:
    ctx = tls_context("tls: {minVersion: VersionTLS13}")
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_cipher_suites_limit_tls12() -> None:
    ctx = tls_context("tls: {minVersion: VersionTLS12, cipherSuites: "
                      "[TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256]}")
    tls12 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-RSA-AES256-GCM-SHA384"}
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
