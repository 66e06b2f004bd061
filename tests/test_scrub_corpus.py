"""A generated corpus: hundreds of realistic secrets go whole, hundreds of look-alikes stay.

Every secret is built at run time from a template of its kind and fresh random
material (a seeded ``random.Random``, so a failure names a reproducible case),
and placed in several surroundings (prose, shell, JSON, YAML, a JSON-escaped
tool argument). "Fully redacted" is checked strictly: no run of 6 or more
characters of the secret material may remain in the output, unless that run
also occurs in the surroundings themselves. Look-alikes (digests, commit ids,
UUIDs, base64 images, identifiers, paths, versions, URLs without credentials,
code that names a password without holding one) must come out byte for byte.

Nothing here is a real credential; the shapes are assembled at run time so no
scanner mistakes this file for a leak.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

import pytest

from agentmem.scrub import scrub_secrets

B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = B62 + "+/"
B64URL = B62 + "-_"
UPPER32 = string.ascii_uppercase + "234567"
SEED = 13
PER_KIND = 8  # random instances of each kind, each in several surroundings


def pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b62_mixed(rng: random.Random, n: int) -> str:
    """Random base62 that has upper, lower and digits (as real keys do)."""
    while True:
        s = pick(rng, B62, n)
        if (
            any(c.isupper() for c in s)
            and any(c.islower() for c in s)
            and sum(c.isdigit() for c in s) >= 2
        ):
            return s


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class Case(NamedTuple):
    kind: str
    text: str
    material: tuple[str, ...]  # the parts that must not survive


Maker = Callable[[random.Random], tuple[str, tuple[str, ...]]]

# ---------------------------------------------------------------------------- secrets


def token(prefix: str, body: Callable[[random.Random], str]) -> Maker:
    def make(rng: random.Random) -> tuple[str, tuple[str, ...]]:
        value = prefix + body(rng)
        return value, (value,)

    return make


def jwt(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    header = b64u(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    payload = b64u(
        json.dumps({"sub": str(rng.randrange(10**9)), "name": pick(rng, B62, 8)}).encode()
    )
    value = f"{header}.{payload}.{b64u(rng.randbytes(32))}"
    return value, (value,)


def pem(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"])
    body = base64.b64encode(rng.randbytes(rng.randrange(180, 600))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    value = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"
    return value, tuple(lines)


def gcp_service_account(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    body = base64.b64encode(rng.randbytes(300)).decode()
    key = "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n"
    doc = {
        "type": "service_account",
        "project_id": "demo-project-" + pick(rng, "0123456789", 6),
        "private_key_id": pick(rng, HEX, 40),
        "private_key": key,
        "client_email": "svc@demo-project.iam.gserviceaccount.com",
    }
    return json.dumps(doc, indent=2), (body,)


def discord(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    user_id = str(rng.randrange(10**17, 10**19)).encode()
    value = f"{b64u(user_id)}.{pick(rng, B64URL, 6)}.{b62_mixed(rng, 27)}"
    return value, (value,)


def telegram(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    value = f"{rng.randrange(10**8, 10**10)}:AA{b62_mixed(rng, 33)}"
    return value, (value,)


def anthropic(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    value = "sk-ant-api03-" + pick(rng, B64URL, 93) + "AA"
    return value, (value,)


def openai_project(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    value = "sk-proj-" + b62_mixed(rng, 74) + "T3BlbkFJ" + b62_mixed(rng, 74)
    return value, (value,)


def openai_legacy(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    value = "sk-" + b62_mixed(rng, 20) + "T3BlbkFJ" + b62_mixed(rng, 20)
    return value, (value,)


def slack(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    kind = rng.choice("baprs")
    value = (
        f"xox{kind}-{rng.randrange(10**10, 10**12)}-{rng.randrange(10**12, 10**13)}-"
        + b62_mixed(rng, 24)
    )
    return value, (value,)


def huggingface(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    while True:
        body = pick(rng, string.ascii_letters, 34)
        if sum(c.isupper() for c in body) >= 10 and sum(c.islower() for c in body) >= 10:
            value = "hf_" + body
            return value, (value,)


def sendgrid(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    value = f"SG.{pick(rng, B64URL, 22)}.{pick(rng, B64URL, 43)}"
    return value, (value,)


SELF_IDENTIFYING: dict[str, Maker] = {
    "aws_access_key_id": token("AKIA", lambda r: pick(r, UPPER32, 16)),
    "aws_session_key_id": token("ASIA", lambda r: pick(r, UPPER32, 16)),
    "github_ghp": token("ghp_", lambda r: b62_mixed(r, 36)),
    "github_gho": token("gho_", lambda r: b62_mixed(r, 36)),
    "github_pat": token("github_pat_", lambda r: b62_mixed(r, 22) + "_" + b62_mixed(r, 59)),
    "gitlab_pat": token("glpat-", lambda r: pick(r, B64URL, 20)),
    "slack": slack,
    "stripe_secret": token("sk_live_", lambda r: b62_mixed(r, 24)),
    "stripe_restricted": token("rk_live_", lambda r: b62_mixed(r, 99)),
    "openai_legacy": openai_legacy,
    "openai_project": openai_project,
    "anthropic": anthropic,
    "huggingface": huggingface,
    "google_api_key": token("AIza", lambda r: pick(r, B64URL, 35)),
    "jwt": jwt,
    "pem_private_key": pem,
    "gcp_service_account": gcp_service_account,
    "npm": token("npm_", lambda r: b62_mixed(r, 36)),
    "pypi": token("pypi-AgEIcHlwaS5vcmc", lambda r: pick(r, B64URL, 120)),
    "twilio_api_key": token("SK", lambda r: pick(r, HEX, 32)),
    "sendgrid": sendgrid,
    "mailgun": token("key-", lambda r: pick(r, HEX, 32)),
    "heroku": token("HRKU-", lambda r: pick(r, B64URL, 60)),
    "digitalocean": token("dop_v1_", lambda r: pick(r, HEX, 64)),
    "discord_bot": discord,
    "telegram_bot": telegram,
    "gitlab_deploy": token("gldt-", lambda r: pick(r, B64URL, 20)),
    "shopify": token("shpat_", lambda r: pick(r, HEX, 32)),
    "databricks": token("dapi", lambda r: pick(r, HEX, 32)),
    "groq": token("gsk_", lambda r: b62_mixed(r, 52)),
    "vault": token("hvs.", lambda r: b62_mixed(r, 90)),
    "age": token("AGE-SECRET-KEY-1", lambda r: pick(r, UPPER32.replace("I", ""), 58)),
}

# Each self-identifying key is also tried in these surroundings.
SURROUNDINGS = [
    "{s}",
    "my key is {s}, please keep it safe",
    'export API_TOKEN="{s}"',
    '{{"credentials": {{"value": "{s}"}}}}',
    "config:\n  token: {s}\n  region: eu-west-1",
    "```\ncurl -H 'X-Api-Key: {s}' https://api.example.com/v1\n```",
    "(`{s}`)",
]


def password_material(rng: random.Random) -> str:
    """A password of the awkward kind: may hold @ : / ; & %-escapes and spaces."""
    pieces = [
        b62_mixed(rng, rng.randrange(8, 14)),
        rng.choice(["@", ":", "/", "%40", "%2F", "!", "#", "$", "^", "*"]),
        b62_mixed(rng, rng.randrange(6, 10)),
    ]
    return "".join(pieces)


def multiword(rng: random.Random) -> str:
    words = ["correct", "horse", "battery", "staple", "purple", "monkey", "dishwasher"]
    return " ".join(rng.sample(words, 3)) + " " + pick(rng, string.digits, 3)


def in_context(rng: random.Random) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(kind, text, material) for secrets that only their surroundings give away."""
    aws_secret = pick(rng, B64, 40)
    yield "aws_secret_ini", f"[default]\naws_secret_access_key = {aws_secret}\n", (aws_secret,)
    yield "aws_secret_env", f"AWS_SECRET_ACCESS_KEY={aws_secret}", (aws_secret,)
    yield (
        "aws_secret_json",
        json.dumps({"SecretAccessKey": aws_secret, "Expiration": "x"}),
        (aws_secret,),
    )
    account_key = base64.b64encode(rng.randbytes(64)).decode()
    yield (
        "azure_account_key",
        "DefaultEndpointsProtocol=https;AccountName=demostore;"
        f"AccountKey={account_key};EndpointSuffix=core.windows.net",
        (account_key,),
    )
    sig = base64.b64encode(rng.randbytes(32)).decode()
    sig_escaped = sig.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    yield (
        "azure_sas",
        "https://demo.blob.core.windows.net/c/file.txt?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2030-01-01T00:00:00Z&spr=https&sig={sig_escaped}",
        (sig_escaped,),
    )
    yield (
        "azure_shared_access_key",
        "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=Root;"
        f"SharedAccessKey={account_key[:44]}",
        (account_key[:44],),
    )
    password = password_material(rng)
    host = rng.choice(["db.internal", "10.0.0.5", "localhost", "pg-1.example.com"])
    scheme = rng.choice(
        ["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "https"]
    )
    yield "url_password", f"DATABASE_URL={scheme}://admin:{password}@{host}:5432/app", (password,)
    yield (
        "url_password_prose",
        f"connect with {scheme}://svc:{password}@{host}/db then",
        (password,),
    )
    phrase = multiword(rng)
    yield "quoted_multiword", f'password: "{phrase}"', (phrase,)
    yield "quoted_multiword_json", json.dumps({"db_password": phrase}), (phrase,)
    yield "quoted_single", f"db_password = '{phrase}'", (phrase,)
    semi = f"{b62_mixed(rng, 6)};{b62_mixed(rng, 6)}&{b62_mixed(rng, 5)},{b62_mixed(rng, 4)}"
    yield "semicolon_password", f"DB_PASSWORD={semi}", (semi,)
    yield "semicolon_password_inline", f"then set DB_PASSWORD={semi} and restart", (semi,)
    spaced = f"{b62_mixed(rng, 6)} {b62_mixed(rng, 6)}"
    yield "env_line_to_end", f"# app\nSECRET_KEY={spaced}\nDEBUG=false", (spaced,)
    django = "django-insecure-" + pick(
        rng, string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)", 50
    )
    yield "env_secret_key", f"SECRET_KEY={django}", (django,)
    opaque = b62_mixed(rng, rng.randrange(32, 64))
    yield "bearer", f"Authorization: Bearer {opaque}", (opaque,)
    yield (
        "bearer_curl",
        f'curl -H "Authorization: Bearer {opaque}" https://api.example.com',
        (opaque,),
    )
    basic = base64.b64encode(f"admin:{password}".encode()).decode()
    yield "basic", f"Authorization: Basic {basic}", (basic,)
    yield "basic_python", json.dumps({"headers": {"Authorization": f"Basic {basic}"}}), (basic,)
    yield (
        "connection_string",
        f"Server=tcp:sql.example.com,1433;Database=app;User ID=sa;Password={password};"
        "Encrypt=True;",
        (password,),
    )
    yield (
        "connection_string_spaces",
        f"Data Source=db;Initial Catalog=app;User Id=app;Password={spaced};",
        (spaced,),
    )
    twilio = pick(rng, HEX, 32)
    yield "twilio_auth_token", f"TWILIO_AUTH_TOKEN={twilio}", (twilio,)
    heroku_uuid = str(uuid.UUID(int=rng.getrandbits(128)))
    yield "heroku_api_key", f"HEROKU_API_KEY={heroku_uuid}", (heroku_uuid,)
    yield "curl_user", f"curl -u deploy:{password} https://ci.example.com/api", (password,)
    api = b62_mixed(rng, 40)
    yield "json_api_key", json.dumps({"api_key": api, "model": "gpt-4o"}), (api,)
    yield "yaml_client_secret", f"oauth:\n  client_secret: {api}\n  client_id: app", (api,)
    yield "query_token", f"GET /v1/data?access_token={api}&page=2", (api,)
    yield "cli_flag", f"deploy --password {password} --verbose", (password,)
    yield "requests_auth", f'requests.get(url, auth=("admin", "{phrase}"))', (phrase,)
    yield "xml", f"<config><password>{password}</password></config>", (password,)
    yield "environ_item", f'os.environ["DB_PASSWORD"] = "{password}"', (password,)
    yield "settings_item", f"settings['api_key'] = '{api}'", (api,)
    yield "netrc", f"machine api.example.com login bot password {password}", (password,)


def secret_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []
    for kind, make in SELF_IDENTIFYING.items():
        for i in range(PER_KIND):
            value, material = make(rng)
            if "\n" in value:
                texts = [value, f"key file:\n{value}\nend", json.dumps({"key": value})]
            else:
                texts = [SURROUNDINGS[(i + j) % len(SURROUNDINGS)].format(s=value) for j in (0, 3)]
            cases.extend(Case(kind, text, material) for text in texts)
    for _ in range(PER_KIND):
        cases.extend(Case(*found) for found in in_context(rng))
    return cases


SECRETS = secret_cases()

# ---------------------------------------------------------------------------- look-alikes


def png_data_uri(rng: random.Random) -> str:
    payload = b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randrange(50, 400))
    payload += b"ghp_" + b"A" * 40 + b"AKIA" + b"B" * 16
    return "data:image/png;base64," + base64.b64encode(payload).decode()


def lookalike_cases() -> list[str]:
    rng = random.Random(SEED + 1)
    out: list[str] = []
    for _ in range(25):
        blob = rng.randbytes(32)
        sha1 = hashlib.sha1(blob).hexdigest()
        sha256 = hashlib.sha256(blob).hexdigest()
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        out += [
            f"commit {sha1}\nAuthor: Dev <dev@example.com>",
            f"Merge: {sha1[:7]} {hashlib.sha1(sha1.encode()).hexdigest()[:7]}",
            f"sha256:{sha256}",
            f"{sha256}  dist/agentmem-0.4.0.tar.gz",
            f"nginx@sha256:{sha256}",
            f'"integrity": "sha512-{base64.b64encode(hashlib.sha512(blob).digest()).decode()}"',
            f"session {u} resumed; parent {str(u).upper()}",
            f"{{{u}}}",
            f"![chart]({png_data_uri(rng)})",
            f"git checkout {sha1[: rng.randrange(7, 13)]}",
            f'ETag: W/"{hashlib.md5(blob).hexdigest()}"',
            f"The key fingerprint is SHA256:{b64u(hashlib.sha256(blob).digest())}.",
            f"cache_key={sha1}",
            f'{{"key": "{sha256}", "size": 12}}',
            f"idempotency_key: {u}",
        ]
    out += [
        "test_password_reset_token_expires_after_one_hour",
        "getAccessTokenFromRefreshTokenAsync(request)",
        "MAX_TOKEN_COUNT_PER_REQUEST = 8192",
        "AbstractSingletonProxyFactoryBean",
        "from huggingface_hub import hf_hub_download",
        "hf_loadPretrainedModelFromHubCache",
        "sk-this-is-a-long-kebab-case-slug-option",
        "the sk_learn_compat_shim module",
        "/usr/lib/python3.12/site-packages/transformers/models/bert/modeling_bert.py",
        "C:\\Users\\dev\\AppData\\Local\\Temp\\tmp8x7y6z2q.json",
        "~/.ssh/id_ed25519.pub and ~/.aws/credentials",
        "./node_modules/@types/node/index.d.ts",
        "version 1.2.3, then v2.0.0-rc.1+build.20240101, pinned ==3.11.4",
        "https://example.com:8443/api/v1/users?page=2&per_page=50",
        "https://medium.com/@author/post-title-abc123",
        "http://localhost:8080/users/@me",
        "https://www.npmjs.com/package/@scope/name",
        "git@github.com:org/repo.git",
        "ssh://git@github.com:22/org/repo.git",
        "https://deploy@example.com/path",
        "mailto:someone@example.com",
        "https://github.com/org/repo/blob/main/README.md#usage",
        'password = getpass.getpass("Password: ")',
        "def login(username: str, password: str) -> Token:",
        "if password is None:\n    raise ValueError('password is required')",
        'api_key = os.environ["OPENAI_API_KEY"]',
        'token = request.headers.get("Authorization")',
        "secret = settings.SECRET_KEY",
        "client = OpenAI(api_key=api_key)",
        "self.password = password",
        "user.set_password(new_password)",
        "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
        'headers = {"Authorization": f"Bearer {token}"}',
        "password: Optional[str] = None",
        "token: str = Field(..., description='the session token')",
        "connect(host=host, user=user, password=password)",
        "password=None",
        "password: null",
        "token_count=1234",
        "max_tokens=4096, token: 5, tokens=12",
        "num_tokens: 512",
        "key=value",
        "sort_key=created_at",
        "secretName: my-tls-secret",
        "API_KEY=${OPENAI_API_KEY}",
        "password: <your-password>",
        'token: "{{ secrets.GITHUB_TOKEN }}"',
        "Authorization: Bearer $TOKEN",
        "We need basic internationalization support.",
        "Use bearer authentication for the admin endpoints.",
        "the password field is required; the token expires in 3600 seconds",
        "getUserById, parseHttpResponse, isAuthenticated, refreshAccessToken",
        "PWD=/home/dev/project",
        "docker run -u 1000:1000 image:latest",
        "git push -u origin main",
        "python -u app.py:main",
        "2024-01-01T12:00:00Z fe80::1ff:fe23:4567:890a 00:1B:44:11:3A:B7 #1e90ff",
        "[REDACTED:openai_key] already",
        "AKIA alone and ghp_ alone and sk- alone",
        "Time: 10:30:45, ratio 16:9",
        "user@example.com wrote: see jane.doe+filter@mail.example.org",
        '{"password": {"type": "string", "minLength": 8}}',
        "Set the password in the settings page, then press Save.",
        "Password: at least 12 characters, one of them a digit.",
        "apiKey: process.env.API_KEY!",
        "password: z.string().min(8),",
        "const password = req.body.password;",
        "secret_file: /etc/app/secret.key",
        "credentials: ~/.aws/credentials",
        "secret: https://vault.example.com/v1/kv/app",
    ]
    for _ in range(30):
        words = rng.sample(
            ["user", "account", "session", "request", "handler", "token", "cache", "value"], 3
        )
        out.append(words[0] + "".join(w.title() for w in words[1:]))
        out.append(base64.b64encode(rng.randbytes(rng.randrange(30, 90))).decode())
    return out


LOOKALIKES = lookalike_cases()

# ---------------------------------------------------------------------------- checks


def leaked_runs(material: str, output: str, surroundings: str) -> list[str]:
    """Runs of 6+ characters of ``material`` in ``output`` that its surroundings do not explain."""
    return [
        material[i : i + 6]
        for i in range(len(material) - 5)
        if material[i : i + 6] in output and material[i : i + 6] not in surroundings
    ]


MARK = re.compile(r"\[REDACTED:\w+\]")


def check_redacted(case: Case, text: str) -> list[str]:
    out = scrub_secrets(text)
    surroundings = text
    for material in case.material:
        surroundings = surroundings.replace(material, "")
    problems = []
    for material in case.material:
        runs = leaked_runs(material, MARK.sub("", out), surroundings)
        if runs:
            problems.append(f"{case.kind}: {runs[:3]} survived in {out!r}")
    if "[REDACTED:" not in out:
        problems.append(f"{case.kind}: nothing redacted in {out!r}")
    if scrub_secrets(out) != out:
        problems.append(f"{case.kind}: not idempotent on {out!r}")
    return problems


def test_the_corpus_is_large_and_varied() -> None:
    kinds = Counter(case.kind for case in SECRETS)
    print(f"\ncorpus: {len(SECRETS)} secrets of {len(kinds)} kinds, {len(LOOKALIKES)} look-alikes")
    assert len(SECRETS) >= 300 and len(kinds) >= 60
    assert len(LOOKALIKES) >= 300


def test_every_secret_is_fully_redacted() -> None:
    problems = [p for case in SECRETS for p in check_redacted(case, case.text)]
    print(f"\n{len(SECRETS) - len(problems)} of {len(SECRETS)} secrets fully redacted")
    assert not problems, "\n".join(problems[:20])


def test_every_secret_is_redacted_inside_a_json_string() -> None:
    """Tool-call arguments hold text as a JSON string: escaped quotes and newlines."""
    problems = [p for case in SECRETS for p in check_redacted(case, json.dumps(case.text))]
    assert not problems, "\n".join(problems[:20])


def test_every_lookalike_survives_unchanged() -> None:
    changed = [(text, scrub_secrets(text)) for text in LOOKALIKES if scrub_secrets(text) != text]
    print(f"\n{len(LOOKALIKES) - len(changed)} of {len(LOOKALIKES)} look-alikes unchanged")
    assert not changed, "\n".join(f"{a!r}\n  -> {b!r}" for a, b in changed[:20])


@pytest.mark.parametrize("kind", sorted(SELF_IDENTIFYING))
def test_each_key_kind_is_redacted_amid_lookalikes(kind: str) -> None:
    """A key between a digest and a UUID goes; its neighbours stay."""
    rng = random.Random(f"{SEED}-{kind}")
    value, material = SELF_IDENTIFYING[kind](rng)
    digest = hashlib.sha256(value.encode()).hexdigest()
    ident = str(uuid.UUID(int=rng.getrandbits(128)))
    out = scrub_secrets(f"digest {digest}\n{value}\nsession {ident}")
    assert digest in out and ident in out
    assert not any(
        leaked_runs(m, MARK.sub("", out), f"digest {digest}\n\nsession {ident}") for m in material
    )
