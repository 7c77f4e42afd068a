"""Certificates for the local control plane.

One self-signed CA signs the API server's serving certificate (SANs for loopback and the in-cluster
service name) and a `system:masters` client certificate used by every component, the tests and the
operator. A separate RSA key pair signs service-account tokens. Generated once per cluster
directory with `cryptography`, so no openssl invocation or network is needed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class Pki:
    """Paths of the files written by :func:`ensure_pki`."""

    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _sign(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usages: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def ensure_pki(directory: Path) -> Pki:
    """Create the CA, serving, admin and service-account material unless it already exists."""
    pki = Pki(directory)
    if all(p.exists() for p in (pki.ca_crt, pki.serving_crt, pki.admin_crt, pki.sa_key)):
        return pki
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = _key()
    ca_name = _name("lws-operator-local-ca")
    ca = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    _write(pki.ca_key, _pem_key(ca_key))
    _write(pki.ca_crt, ca.public_bytes(serialization.Encoding.PEM))

    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(n)
        for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                  "kubernetes.default.svc.cluster.local")
    ]
    # 10.244.0.1: the node tier's bridge, the address it advertises to the pod network.
    sans += [x509.IPAddress(ipaddress.ip_address(a))
             for a in ("127.0.0.1", "10.96.0.1", "10.244.0.1")]
    serving = _sign(
        _name("kube-apiserver"), serving_key.public_key(), ca_name, ca_key,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans,
    )
    _write(pki.serving_key, _pem_key(serving_key))
    _write(pki.serving_crt, serving.public_bytes(serialization.Encoding.PEM))

    admin_key = _key()
    admin = _sign(
        _name("admin", "system:masters"), admin_key.public_key(), ca_name, ca_key,
        usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    _write(pki.admin_key, _pem_key(admin_key))
    _write(pki.admin_crt, admin.public_bytes(serialization.Encoding.PEM))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(pki.sa_key, _pem_key(sa_key))
    _write(
        pki.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return pki


def issue_serving_cert(directory: Path, sans: list[str]) -> tuple[bytes, Path, Path]:
    """A throwaway CA and a serving certificate for ``sans`` (IPs or DNS names), as a webhook
    server needs: returns (CA PEM for a caBundle, certificate path, key path)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("lws-operator-test-webhook-ca")
    ca = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    names: list[x509.GeneralName] = []
    for san in sans:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            names.append(x509.DNSName(san))
    key = _key()
    cert = _sign(_name(sans[0]), key.public_key(), ca_name, ca_key,
                 usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=names)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _pem_key(key))
    return ca.public_bytes(serialization.Encoding.PEM), cert_path, key_path


def issue_cert(pki: Pki, name: str, common_name: str, organization: str | None = None,
               sans: list[str] | None = None) -> tuple[Path, Path]:
    """A certificate signed by the cluster CA, as ``<name>.crt``/``<name>.key`` next to it:
    a client certificate (``common_name``/``organization`` are the user and group the API server
    sees), and a serving one too when ``sans`` (IPs or DNS names) are given."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    names: list[x509.GeneralName] = []
    for san in sans or []:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            names.append(x509.DNSName(san))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if names:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    key = _key()
    cert = _sign(_name(common_name, organization), key.public_key(), ca.subject, ca_key,
                 usages=usages, sans=names or None)
    cert_path, key_path = pki.dir / f"{name}.crt", pki.dir / f"{name}.key"
    _write(key_path, _pem_key(key))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
