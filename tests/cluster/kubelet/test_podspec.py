"""What the kubelet refuses to act on, and the paths it refuses to build."""

import pytest

from trainctl.cluster.kubelet import paths, podspec
from trainctl.cluster.kubelet.env import ConfigError, command_line


def pod(**container):
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
            "spec": {"containers": [{"name": "main", "image": "python", "command": ["python", "-c", "pass"],
                                     **container}]}}


def test_a_runnable_pod_has_no_problems():
    assert podspec.problems(pod(args=["--epochs", 3], ports=[{"containerPort": 23456}],
                                resources={"limits": {"cpu": "500m", "memory": "1Gi"}},
                                env=[{"name": "A", "value": "1"}])) == []


@pytest.mark.parametrize("container, field", [
    ({"name": "a/b"}, "spec.containers[0].name"),
    ({"name": ".."}, "spec.containers[0].name"),
    ({"command": "python -c pass"}, "spec.containers[0].command"),
    ({"args": {"a": 1}}, "spec.containers[0].args"),
    ({"args": [["nested"]]}, "spec.containers[0].args[0]"),
    ({"ports": [{"containerPort": 99999}]}, "spec.containers[0].ports[0].containerPort"),
    ({"ports": [{"containerPort": "80"}]}, "spec.containers[0].ports[0].containerPort"),
    ({"ports": [{"containerPort": 80, "protocol": "HTTP"}]}, "spec.containers[0].ports[0].protocol"),
    ({"resources": {"requests": {"cpu": "abc"}}}, "spec.containers[0].resources.requests[cpu]"),
    ({"env": [{"name": "A", "valueFrom": {"fieldRef": "metadata.name"}}]}, "spec.containers[0].env[0].valueFrom.fieldRef"),
    ({"env": "A=1"}, "spec.containers[0].env"),
])
def test_each_malformed_field_is_named(container, field):
    found = podspec.problems(pod(**container))
    assert any(problem.startswith(f"{field}: Invalid value") for problem in found), found


def test_pod_level_problems():
    bad = pod()
    bad["spec"]["restartPolicy"] = "Sometimes"
    bad["spec"]["initContainers"] = [{"name": "main", "command": ["true"]}]
    bad["metadata"]["labels"] = {"app": ["x"]}
    found = podspec.problems(bad)
    assert [p.split(":")[0] for p in found] == ["metadata.labels", "spec.containers[0].name", "spec.restartPolicy"]
    assert podspec.problems({"metadata": {"name": "p", "uid": "u"}, "spec": {}}) == ["spec.containers: Required value"]
    misshapen = {"metadata": {"name": "p", "uid": "u"}, "spec": "garbage", "status": [1]}
    assert not podspec.well_formed(misshapen) and podspec.addressable(misshapen)
    assert [p.split(":")[0] for p in podspec.problems(misshapen)] == ["status", "spec", "spec.containers"]
    assert not podspec.addressable({"metadata": {"name": "p"}}) and not podspec.addressable({"metadata": "p"})


def test_command_line_refuses_what_is_not_a_list():
    with pytest.raises(ConfigError, match="command must be a list of strings"):
        command_line({"name": "c", "command": "python -c pass"}, {})


@pytest.mark.parametrize("names", [("..",), ("a/b",), ("/etc",), ("",), ("uid", "../../x")])
def test_paths_stay_inside_their_directory(tmp_path, names):
    with pytest.raises(paths.OutsideDirectory):
        paths.inside(tmp_path / "pods", *names)


def test_a_symlink_out_of_the_directory_is_refused(tmp_path):
    (tmp_path / "pods").mkdir()
    (tmp_path / "pods" / "link").symlink_to(tmp_path)
    assert paths.inside(tmp_path / "pods", "uid", "main", "0.log") == (tmp_path / "pods" / "uid" / "main" / "0.log").resolve()
    with pytest.raises(paths.OutsideDirectory):
        paths.inside(tmp_path / "pods", "link", "x")
