"""The binding step without a server: Scheduled and FailedScheduling Events (and how often a
pod that keeps failing is recorded again), scheduling gates, queue order by priority, the
fields this scheduler refuses aloud and the preemption half of the message."""

from trainctl.cluster.scheduler.binding import Scheduler
from trainctl.cluster.scheduler.fit import NodeResources, schedule

ALLOC = {"cpu": "2", "memory": "4Gi", "pods": "110"}


class Client:
    def __init__(self):
        self.bindings = []

    def create(self, resource, body, subresource=None):
        assert subresource == "binding"
        self.bindings.append((body["metadata"]["name"], body["target"]["name"]))


class Statuses:
    def __init__(self):
        self.conditions = []

    def patch(self, meta, body):
        self.conditions.append((meta["name"], body["status"]["conditions"][0]))


class Events:
    def __init__(self):
        self.recorded = []

    def record(self, pod, event):
        self.recorded.append((pod["metadata"]["name"], event.type, event.reason, event.message))


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def pod(name, cpu=None, created="2026-01-01T00:00:00Z", **spec):
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}} if cpu else {}}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"containers": [container], **spec}}


def scheduler():
    client, statuses, events, clock = Client(), Statuses(), Events(), Clock()
    return Scheduler(client, statuses, recorder=events, clock=clock), client, statuses, events, clock


def test_a_bound_pod_gets_a_scheduled_event():
    s, client, _, events, _ = scheduler()
    nodes = s.new_pass([NodeResources("n1", ALLOC, {"kubernetes.io/hostname": "n1"})])
    s.place(pod("p"), nodes)
    assert client.bindings == [("p", "n1")]
    assert events.recorded == [("p", "Normal", "Scheduled", "Successfully assigned default/p to n1")]


def test_failed_scheduling_is_recorded_with_the_condition_and_backed_off():
    s, client, statuses, events, clock = scheduler()
    nodes = s.new_pass([NodeResources("n1", ALLOC)])
    too_big = pod("big", cpu="3")
    message = ("0/1 nodes are available: 1 Insufficient cpu. "
               "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    s.place(too_big, nodes)
    assert events.recorded == [("big", "Warning", "FailedScheduling", message)]
    assert statuses.conditions == [("big", {**statuses.conditions[0][1], "reason": "Unschedulable", "message": message})]
    for _ in range(5):  # passes run on every change in the cluster: not an Event each
        s.place(too_big, nodes)
    assert len(events.recorded) == 1 and len(statuses.conditions) == 1
    clock.now += 1.0
    s.place(too_big, nodes)
    clock.now += 1.0
    s.place(too_big, nodes)  # the back-off doubled to 2 s
    assert len(events.recorded) == 2
    clock.now += 1.0
    s.place(too_big, nodes)
    assert len(events.recorded) == 3
    clock.now += 60
    for _ in range(10):
        s.place(too_big, nodes)
        clock.now += 10.0  # the back-off stops growing at 10 s
    assert len(events.recorded) == 13
    assert client.bindings == []


def test_a_new_reason_is_recorded_at_once():
    s, _, _, events, _ = scheduler()
    s.place(pod("big", cpu="3"), s.new_pass([NodeResources("n1", ALLOC)]))
    s.place(pod("big", cpu="3"), s.new_pass([NodeResources("n1", ALLOC, unschedulable=True)]))
    assert [e[3].split(".")[0] for e in events.recorded] == ["0/1 nodes are available: 1 Insufficient cpu",
                                                              "0/1 nodes are available: 1 node(s) were unschedulable"]


def test_gated_pods_wait_without_an_event():
    s, client, statuses, events, _ = scheduler()
    gated = pod("g", schedulingGates=[{"name": "example.com/quota"}])
    s.place(gated, s.new_pass([NodeResources("n1", ALLOC)]))
    s.place(gated, s.new_pass([NodeResources("n1", ALLOC)]))
    assert client.bindings == [] and events.recorded == []
    assert [(name, c["reason"], c["message"]) for name, c in statuses.conditions] == [
        ("g", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")]
    del gated["spec"]["schedulingGates"]
    s.place(gated, s.new_pass([NodeResources("n1", ALLOC)]))
    assert client.bindings == [("g", "n1")]


def test_higher_priority_pods_go_first_then_the_oldest():
    s, *_ = scheduler()
    old = pod("old", created="2026-01-01T00:00:00Z")
    new = pod("new", created="2026-01-02T00:00:00Z")
    urgent = pod("urgent", created="2026-01-03T00:00:00Z", priority=1000)
    assert [p["metadata"]["name"] for p in s.pending([new, urgent, old])] == ["urgent", "old", "new"]


def test_unimplemented_placement_fields_are_refused_by_name():
    nodes = [NodeResources("n1", ALLOC), NodeResources("n2", ALLOC)]
    claims = pod("dra", resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    assert schedule(claims, nodes).full_message == (
        "0/2 nodes are available: spec.resourceClaims is not implemented by this scheduler. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    volumes = pod("pvc", volumes=[{"name": "scratch", "emptyDir": {}},
                                  {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    assert schedule(volumes, nodes).message == (
        "0/2 nodes are available: spec.volumes[1].persistentVolumeClaim is not implemented by this scheduler.")
    pod_level = pod("pl", resources={"requests": {"cpu": "1"}})
    assert "spec.resources is not implemented" in schedule(pod_level, nodes).message
    assert schedule(pod("plain", volumes=[{"name": "scratch", "emptyDir": {}}]), nodes).fits


def test_refusals_reach_the_event():
    s, client, _, events, _ = scheduler()
    s.place(pod("dra", resourceClaims=[{"name": "gpu"}]), s.new_pass([NodeResources("n1", ALLOC)]))
    assert client.bindings == []
    assert events.recorded[0][2:] == ("FailedScheduling", "0/1 nodes are available: spec.resourceClaims is not "
                                      "implemented by this scheduler. preemption: 0/1 nodes are available: "
                                      "1 Preemption is not helpful for scheduling.")


def test_preemption_names_the_node_and_victims_or_says_why_none():
    low = pod("low", cpu="2")
    nodes = [NodeResources("n1", ALLOC).with_pod(low), NodeResources("n2", ALLOC, unschedulable=True)]
    urgent = pod("urgent", cpu="1", priority=1000)
    decision = schedule(urgent, nodes)
    assert decision.candidate is not None and decision.candidate.node == "n1"
    assert [v["metadata"]["name"] for v in decision.candidate.victims] == ["low"]
    assert decision.full_message == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."
    assert schedule(pod("same", cpu="1"), nodes).preemption == (
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.")
    huge = pod("huge", cpu="3", priority=1000)
    assert schedule(huge, nodes).preemption == (
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling.")
    never = pod("never", cpu="1", priority=1000, preemptionPolicy="Never")
    assert schedule(never, nodes).preemption == "preemption: not eligible due to preemptionPolicy=Never."


def test_a_port_held_outside_the_cluster_is_no_case_for_preemption():
    p = pod("p", priority=1000)
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 23456}]
    nodes = [NodeResources("n1", ALLOC).with_pod(pod("low"))]
    decision = schedule(p, nodes, port_available=lambda port, protocol: False)
    assert decision.preemption == "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def test_no_nodes_at_all():
    assert schedule(pod("p"), []).full_message == "no nodes available to schedule pods"


class PreemptingClient(Client):
    """Records the writes a preemption makes."""

    def __init__(self):
        super().__init__()
        self.patches, self.deleted = [], []

    def patch(self, resource, namespace, name, body, subresource=None):
        assert subresource == "status"
        self.patches.append((name, body["status"]))

    def delete(self, resource, namespace, name, uid=None, **options):
        assert options == {}  # a graceful delete: the victim's own grace period
        self.deleted.append(name)
        return True


def test_pods_of_one_pass_preempt_different_victims_and_wait_for_them():
    client, events = PreemptingClient(), Events()
    s = Scheduler(client, Statuses(), recorder=events, clock=Clock())
    nodes = s.new_pass([NodeResources("n1", ALLOC).with_pod(pod("low-1", cpu="2")),
                        NodeResources("n2", ALLOC).with_pod(pod("low-2", cpu="2"))])
    first, second = pod("first", cpu="2", priority=1000), pod("second", cpu="2", priority=1000)
    s.place(first, nodes)
    s.place(second, nodes)
    assert client.deleted == ["low-1", "low-2"]
    assert [(name, status.get("nominatedNodeName")) for name, status in client.patches
            if "nominatedNodeName" in status] == [("first", "n1"), ("second", "n2")]
    marked = [status["conditions"][-1] for name, status in client.patches if name.startswith("low-")]
    assert {(c["type"], c["status"], c["reason"]) for c in marked} == {("DisruptionTarget", "True", "PreemptionByScheduler")}
    assert [e for e in events.recorded if e[2] == "Preempted"] == [
        ("low-1", "Normal", "Preempted", "Preempted by pod uid-first on node n1"),
        ("low-2", "Normal", "Preempted", "Preempted by pod uid-second on node n2")]
    s.place(first, nodes)  # its victim is still terminating: no second preemption
    assert client.deleted == ["low-1", "low-2"]
    assert events.recorded[-1][3].endswith("preemption: not eligible due to a terminating pod on the nominated node.")


def test_a_nomination_that_no_longer_holds_is_cleared():
    """Its victim gone, the room taken by a pod of higher priority, nothing left to preempt:
    the pod is no longer nominated, so it holds no room from others."""
    client = PreemptingClient()
    s = Scheduler(client, Statuses(), recorder=Events(), clock=Clock())
    s.place(pod("first", cpu="2", priority=1000), s.new_pass([NodeResources("n1", ALLOC).with_pod(pod("low", cpu="2"))]))
    assert s.nominated() == {"n1": [pod("first", cpu="2", priority=1000)]}
    taken = s.new_pass([NodeResources("n1", ALLOC).with_pod(pod("boss", cpu="2", priority=5000))])
    s.place(pod("first", cpu="2", priority=1000), taken)
    assert s.nominated() == {} and client.patches[-1] == ("first", {"nominatedNodeName": None})
