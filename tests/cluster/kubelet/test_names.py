"""Service-name rewriting: whole tokens only, every DNS form, waiting when not resolvable yet."""

from trainctl.cluster.network.names import Pending, rewrite, split_service_name

SERVICES = {("default", "job-master-0"): "127.128.0.5", ("other", "db"): "127.96.0.9"}


def resolve(namespace, name):
    if (namespace, name) == ("default", "late"):
        return Pending("a pod selected by headless Service default/late")
    return SERVICES.get((namespace, name))


def test_every_dns_form_and_ports():
    for text in ("job-master-0", "job-master-0.default", "job-master-0.default.svc",
                 "job-master-0.default.svc.cluster.local"):
        assert rewrite(text, "default", resolve) == ("127.128.0.5", [])
        assert rewrite(text + ":23456", "default", resolve) == ("127.128.0.5:23456", [])
    assert rewrite("db.other:5432", "default", resolve)[0] == "127.96.0.9:5432"
    assert rewrite("db", "default", resolve)[0] == "db"  # another namespace's short name does not resolve


def test_tokens_inside_arguments_urls_and_scripts():
    assert rewrite("--master_addr=job-master-0", "default", resolve)[0] == "--master_addr=127.128.0.5"
    assert rewrite("tcp://job-master-0:1/x", "default", resolve)[0] == "tcp://127.128.0.5:1/x"
    script = "until nslookup job-master-0; do sleep 1; done"
    assert rewrite(script, "default", resolve)[0] == "until nslookup 127.128.0.5; do sleep 1; done"


def test_partial_words_and_paths_are_left_alone():
    for text in ("/data/job-master-0/ckpt", "job-master-0/ckpt", "my-job-master-0", "job-master-0-backup",
                 "job-master-0_x", "JOB-MASTER-0x", "job-master-0.example.com"):
        assert rewrite(text, "default", resolve) == (text, [])


def test_pending_names_are_reported():
    assert rewrite("late:80", "default", resolve) == ("late:80", ["a pod selected by headless Service default/late"])


def test_split_service_name():
    assert split_service_name("a", "ns") == ("ns", "a")
    assert split_service_name("a.b.svc.cluster.local", "ns") == ("b", "a")
    assert split_service_name("a.b.c", "ns") is None


def test_numbers_and_ip_literals_are_never_looked_up():
    asked = []

    def record(namespace, name):
        asked.append((namespace, name))
        return None

    assert rewrite("--steps=60 10.0.0.1:80 127.0.0.1 8080", "default", record)[0] == "--steps=60 10.0.0.1:80 127.0.0.1 8080"
    assert asked == []
