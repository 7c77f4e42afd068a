"""The configuration's ``tls`` section on the webhook server's TLS context (admission.server)."""

from __future__ import annotations

import contextlib
import datetime as dt
import ssl

from lws_operator.admission.server import ServingTLS
from lws_operator.api.config import load
from lws_operator.logic.runtime import certs

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


def _handshake(server_ctx: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS 1.3 handshake in memory; the client after reading what the server sent."""
    client_ctx = ssl.create_default_context()
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    while not all(done):
        for i, (side, out, peer_in) in enumerate(((client, c_out, s_in), (server, s_out, c_in))):
            if not done[i]:
                try:
                    side.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
    with contextlib.suppress(ssl.SSLWantReadError):
        client.read(1)  # takes in the post-handshake messages (session tickets), if any
    return client


def test_no_session_tickets() -> None:
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, dt.timedelta(days=1))
    cert, key = certs.new_serving_cert(ca, ca_key, now, dt.timedelta(days=1), ["localhost"], [])
    pems = certs.encode(certs.CertState((ca,), ca_key, cert, key))
    tls = ServingTLS()
    tls.load(pems[certs.TLS_CERT_KEY], pems[certs.TLS_KEY_KEY])
    client = _handshake(tls.context)
    assert client.version() == "TLSv1.3"
    assert client.session is not None
    assert not client.session.has_ticket


def test_an_rsa_certificate_from_elsewhere_is_served() -> None:
    """The operator issues ECDSA keys and the chart asks cert-manager for one, but a Secret
    written by someone else may hold RSA (cert-manager's default): it is served as it is."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    tls = ServingTLS()
    assert tls.load(cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    client = _handshake(tls.context)
    assert client.version() == "TLSv1.3"
    peer = x509.load_der_x509_certificate(client.getpeercert(binary_form=True) or b"")
    assert isinstance(peer.public_key(), rsa.RSAPublicKey)
