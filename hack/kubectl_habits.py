"""What a daily kubectl user does, tried on a throwaway `trainctl local up --nodes 3`.

    .venv/bin/python hack/kubectl_habits.py [--only REGEX] [--verbose]

Each habit is one command form a user types (kubectl 1.32), run as they would run it, with
what a real cluster answers: its exit code and a pattern its output matches. The habits run
in order in one namespace (later ones use what earlier ones made), so a failure can make the
ones that depend on it fail too; the table says which failed and why. Numbers go to
docs/compatibility.md ("kubectl, command by command").

Images are not pulled: a pod's command runs from this machine's filesystem, so the habits
give every container a command (``python3 -m http.server``, ``sh -c ...``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainctl.cluster.local_cluster import LocalCluster  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NS = "habits"
NODE = "trainctl-local-2"


@dataclass(frozen=True)
class Habit:
    form: str  # what the user types, as the table shows it
    command: str  # bash, run in the scratch directory with KUBECONFIG set
    expect: str = ""  # a regex the combined output must match
    rc: int = 0
    timeout: float = 180.0


FILES = {
    "deploy.yaml": """
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, labels: {app: api}}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: python:3.11
        command: [python3, -m, http.server, "8000"]
        ports: [{containerPort: 8000}]
""",
    "sts.yaml": """
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: db, image: postgres, command: [python3, -m, http.server, "5432"]}
""",
    "ds.yaml": """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: busybox, command: [sleep, infinity]}
""",
    "limits.yaml": """
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {memory: 512Mi}
    defaultRequest: {memory: 64Mi}
""",
    "cm.yaml": """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
""",
    "cm-other.yaml": """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: slow}
""",
}


def habits(node: str) -> list[Habit]:
    h = Habit
    return [
        # the cluster
        h("kubectl version", "kubectl version", r"Server Version: v1\."),
        h("kubectl cluster-info", "kubectl cluster-info", r"Kubernetes control plane is running at https://"),
        h("kubectl cluster-info dump", "kubectl cluster-info dump --namespaces default | head -c 2000", r'"kind": "(EventList|NodeList)"'),
        h("kubectl api-resources", "kubectl api-resources", r"pytorchjobs\s+kubeflow.org/v1\s+true\s+PyTorchJob"),
        h("kubectl api-versions", "kubectl api-versions", r"(?m)^apps/v1$[\s\S]*^kubeflow.org/v1$"),
        h("kubectl get --raw /readyz?verbose", "kubectl get --raw '/readyz?verbose'", r"readyz check passed"),
        h("kubectl get nodes", "kubectl get nodes", r"trainctl-local\s+Ready\s+control-plane"),
        h("kubectl get nodes -o wide", "kubectl get nodes -o wide", r"INTERNAL-IP\s+EXTERNAL-IP\s+OS-IMAGE\s+KERNEL-VERSION\s+CONTAINER-RUNTIME"),
        h("kubectl describe node", f"kubectl describe node {node}", r"Allocatable:[\s\S]*Allocated resources:"),
        h("kubectl get lease -n kube-node-lease", "kubectl get lease -n kube-node-lease", r"NAME\s+HOLDER\s+AGE\s+trainctl-local"),
        h("kubectl get crd", "kubectl get crd", r"NAME\s+CREATED AT\s+mpijobs|pytorchjobs.kubeflow.org\s+\d{4}-"),
        h("kubectl explain pytorchjob.spec", "kubectl explain pytorchjob.spec", r"pytorchReplicaSpecs"),
        h("kubectl explain pod.spec.containers.resources", "kubectl explain pod.spec.containers.resources", r"limits\s+<map\[string\]Quantity>"),
        h("kubectl auth whoami", "kubectl auth whoami", r"Username\s+\S+"),
        h("kubectl auth can-i create pods", "kubectl auth can-i create pods", r"^yes"),
        h("kubectl get priorityclass", "kubectl get priorityclass", r"system-cluster-critical\s+2000000000\s+false"),
        # a namespace of one's own
        h("kubectl create namespace", f"kubectl create namespace {NS}", rf"namespace/{NS} created"),
        h("kubectl config set-context --current --namespace", f"kubectl config set-context --current --namespace={NS}", r"modified"),
        h("kubectl get ns", "kubectl get ns", rf"{NS}\s+Active"),
        # pods
        h("kubectl run --port", "kubectl run web --image=python:3.11 --port=8080 --labels=app=web -- python3 -m http.server 8080", r"pod/web created"),
        h("kubectl wait --for=condition=Ready pod", "kubectl wait --for=condition=Ready pod/web --timeout=120s", r"pod/web condition met", timeout=130),
        h("kubectl get pods", "kubectl get pods", r"web\s+1/1\s+Running\s+0\s+\d+s"),
        h("kubectl get pods -o wide", "kubectl get pods -o wide", r"IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES[\s\S]*web\s+1/1\s+Running"),
        h("kubectl get pod -o yaml", "kubectl get pod web -o yaml", r"phase: Running"),
        h("kubectl get pod -o jsonpath", "kubectl get pod web -o jsonpath='{.status.podIP}'", r"^\d+\.\d+\.\d+\.\d+$"),
        h("kubectl get pods --show-labels", "kubectl get pods --show-labels", r"app=web"),
        h("kubectl get pods -l", "kubectl get pods -l app=web -o name", r"^pod/web$"),
        h("kubectl get pods --field-selector", "kubectl get pods --field-selector=status.phase=Running -o name", r"pod/web"),
        h("kubectl get pods -o custom-columns", "kubectl get pods -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName", r"web\s+trainctl-local"),
        h("kubectl get pods --sort-by", "kubectl get pods --sort-by=.metadata.creationTimestamp", r"web"),
        h("kubectl get pods -A", "kubectl get pods -A", r"NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE[\s\S]*habits\s+web"),
        h("kubectl get pods --watch", "timeout 4 kubectl get pods --watch; true", r"web\s+1/1\s+Running"),
        h("kubectl describe pod", "kubectl describe pod web", r"Status:\s+Running[\s\S]*Events:[\s\S]*Started"),
        h("kubectl run --restart=Never + logs", "kubectl run hello --image=busybox --restart=Never -- sh -c 'echo hello; echo world' "
          "&& kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/hello --timeout=120s && kubectl logs hello", r"hello\nworld", timeout=130),
        h("kubectl logs --tail", "kubectl logs hello --tail=1", r"^world$"),
        h("kubectl logs --timestamps", "kubectl logs hello --timestamps", r"^\d{4}-\d\d-\d\dT\S+Z hello"),
        h("kubectl logs -f", "kubectl logs -f hello", r"hello\nworld"),
        h("kubectl logs -p (a restarted container)", "kubectl run crash --image=busybox --restart=Always -- sh -c 'echo try; exit 1' "
          "&& kubectl wait --for=jsonpath='{.status.containerStatuses[0].restartCount}'=1 pod/crash --timeout=120s && kubectl logs crash -p",
          r"^try$", timeout=130),
        h("kubectl get pods (a crashing pod)", "kubectl get pod crash", r"crash\s+0/1\s+(Error|CrashLoopBackOff)\s+\d+ \(\d+s ago\)"),
        h("kubectl exec", "kubectl exec web -- echo hi", r"^hi$"),
        h("kubectl exec -i (stdin)", "echo piped | kubectl exec -i web -- cat", r"^piped$"),
        h("kubectl exec (exit code)", "kubectl exec web -- sh -c 'exit 3'", r"command terminated with exit code 3", rc=3),
        h("kubectl exec (no such command)", "kubectl exec web -- nosuch", r"executable file not found in \$PATH", rc=1),
        h("kubectl cp (to a pod)", "echo copied > local.txt && kubectl cp local.txt web:/tmp/in.txt && kubectl exec web -- cat /tmp/in.txt", r"^copied$"),
        h("kubectl cp (from a pod)", "kubectl cp web:/tmp/in.txt back.txt && cat back.txt", r"^copied$"),
        h("kubectl port-forward pod", "kubectl port-forward pod/web :8080 > pf.out 2>&1 & pf=$!; "
          "for i in $(seq 60); do port=$(grep -o '127.0.0.1:[0-9]*' pf.out | head -1); [ -n \"$port\" ] && break; sleep 0.5; done; "
          "curl -s -o /dev/null -w '%{http_code}' http://$port/; kill $pf", r"200"),
        h("kubectl run -i --rm (attach)", "echo typed | kubectl run ask -i --rm --restart=Never --image=python:3.11 -- python3 -c 'print(input().upper())'",
          r"TYPED[\s\S]*pod \"ask\" deleted"),
        h("kubectl label", "kubectl label pod web tier=front", r"pod/web labeled"),
        h("kubectl annotate", "kubectl annotate pod web note=first", r"pod/web annotated"),
        h("kubectl edit", "KUBE_EDITOR=\"sed -i s/note:\\ first/note:\\ second/\" kubectl edit pod web && kubectl get pod web -o jsonpath='{.metadata.annotations.note}'",
          r"pod/web edited\s*second"),
        h("kubectl patch (strategic)", "kubectl patch pod web -p '{\"metadata\":{\"labels\":{\"patched\":\"yes\"}}}'", r"pod/web patched"),
        h("kubectl patch --type=json", "kubectl patch pod web --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/labels/patched\"}]'", r"pod/web patched"),
        h("kubectl patch (immutable field)", "kubectl patch pod web -p '{\"spec\":{\"restartPolicy\":\"Never\"}}'", r"Forbidden: pod updates may not change fields", rc=1),
        h("kubectl get events", "kubectl get events", r"Normal\s+Scheduled\s+pod/web"),
        h("kubectl events --for", "kubectl events --for pod/web", r"Started"),
        h("kubectl top pods", "for i in $(seq 60); do kubectl top pods 2>&1 | grep -q web && break; sleep 2; done; kubectl top pods", r"NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)[\s\S]*web\s+\d+m\s+\d+Mi", timeout=150),
        h("kubectl top nodes", "kubectl top nodes", r"trainctl-local\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%"),
        # Services and names
        h("kubectl expose pod", "kubectl expose pod web --port=80 --target-port=8080", r"service/web exposed"),
        h("kubectl get svc", "kubectl get svc web", r"web\s+ClusterIP\s+\d+\.\d+\.\d+\.\d+\s+<none>\s+80/TCP"),
        h("kubectl get ep", "for i in $(seq 30); do kubectl get ep web | grep -q 8080 && break; sleep 1; done; kubectl get ep web", r"web\s+\d+\.\d+\.\d+\.\d+:8080"),
        h("kubectl get endpointslices", "kubectl get endpointslices -l kubernetes.io/service-name=web", r"web-\w+\s+IPv4\s+8080\s+\d+\.\d+"),
        h("kubectl describe svc", "kubectl describe svc web", r"Endpoints:\s+\d+\.\d+\.\d+\.\d+:8080"),
        h("curl a Service name from a pod", "kubectl run client --image=curlimages/curl --restart=Never -- sleep 600 >/dev/null && "
          "kubectl wait --for=condition=Ready pod/client --timeout=120s >/dev/null && "
          "kubectl exec client -- curl -s -o /dev/null -w '%{http_code}' http://web/", r"^200$", timeout=130),
        h("getent hosts a Service's full name", f"kubectl exec web -- getent hosts web.{NS}.svc.cluster.local", r"^\d+\.\d+\.\d+\.\d+\s+web"),
        h("kubectl create service nodeport", "kubectl create service nodeport np --tcp=80:8080 && kubectl get svc np", r"np\s+NodePort\s+\S+\s+<none>\s+80:3\d{4}/TCP"),
        h("kubectl proxy + services/proxy", "kubectl proxy --port=0 > proxy.out 2>&1 & p=$!; "
          "for i in $(seq 60); do port=$(grep -o '127.0.0.1:[0-9]*' proxy.out | head -1); [ -n \"$port\" ] && break; sleep 0.5; done; "
          f"curl -s -o /dev/null -w '%{{http_code}}' http://$port/api/v1/namespaces/{NS}/services/web:80/proxy/; kill $p", r"^200$"),
        h("kubectl get --raw pods/proxy", f"kubectl get --raw /api/v1/namespaces/{NS}/pods/web:8080/proxy/", r"Directory listing"),
        # configuration
        h("kubectl create configmap", "kubectl create configmap cfg --from-literal=a=1 --from-literal=b=2", r"configmap/cfg created"),
        h("kubectl get cm", "kubectl get cm cfg", r"NAME\s+DATA\s+AGE\s+cfg\s+2\s+"),
        h("kubectl create secret generic", "kubectl create secret generic pw --from-literal=password=s3cret", r"secret/pw created"),
        h("kubectl get secret", "kubectl get secret pw", r"NAME\s+TYPE\s+DATA\s+AGE\s+pw\s+Opaque\s+1\s+"),
        h("kubectl get secret -o jsonpath | base64 -d", "kubectl get secret pw -o jsonpath='{.data.password}' | base64 -d", r"^s3cret$"),
        h("kubectl create serviceaccount", "kubectl create serviceaccount bot", r"serviceaccount/bot created"),
        h("kubectl get sa", "kubectl get sa bot", r"NAME\s+SECRETS\s+AGE\s+bot\s+0\s+"),
        h("kubectl create token", "kubectl create token bot", r"^eyJ[\w-]+\.[\w-]+\.[\w-]+$"),
        # RBAC
        h("kubectl create role", "kubectl create role reader --verb=get,list,watch --resource=pods", r"role.rbac.authorization.k8s.io/reader created"),
        h("kubectl create rolebinding", f"kubectl create rolebinding bot-reads --role=reader --serviceaccount={NS}:bot", r"rolebinding.rbac.authorization.k8s.io/bot-reads created"),
        h("kubectl auth can-i --as (allowed)", f"kubectl auth can-i list pods --as=system:serviceaccount:{NS}:bot", r"^yes"),
        h("kubectl auth can-i --as (denied)", f"kubectl auth can-i delete pods --as=system:serviceaccount:{NS}:bot", r"^no", rc=1),
        h("kubectl get --as (forbidden)", f"kubectl get secrets --as=system:serviceaccount:{NS}:bot",
          rf'secrets is forbidden: User "system:serviceaccount:{NS}:bot" cannot list resource "secrets"', rc=1),
        h("kubectl create clusterrole", "kubectl create clusterrole node-reader --verb=get,list --resource=nodes", r"clusterrole.rbac.authorization.k8s.io/node-reader created"),
        h("kubectl create clusterrolebinding", f"kubectl create clusterrolebinding bot-nodes --clusterrole=node-reader --serviceaccount={NS}:bot",
          r"clusterrolebinding.rbac.authorization.k8s.io/bot-nodes created"),
        h("kubectl auth can-i --list", f"kubectl auth can-i --list --as=system:serviceaccount:{NS}:bot", r"pods\s+\[\]\s+\[\]\s+\[get list watch\]"),
        # apply, client- and server-side
        h("kubectl apply -f", "kubectl apply -f cm.yaml", r"configmap/settings created"),
        h("kubectl apply -f (again)", "kubectl apply -f cm.yaml", r"configmap/settings unchanged"),
        h("kubectl diff", "kubectl diff -f cm-other.yaml", r"-  mode: fast\n\+  mode: slow", rc=1),
        h("kubectl apply --dry-run=server", "kubectl apply -f cm-other.yaml --dry-run=server && kubectl get cm settings -o jsonpath='{.data.mode}'", r"\(server dry run\)\s*fast"),
        h("kubectl create --dry-run=client -o yaml", "kubectl create deployment x --image=y --dry-run=client -o yaml", r"kind: Deployment"),
        h("kubectl replace", "kubectl replace -f cm-other.yaml", r"configmap/settings replaced"),
        h("kubectl apply --server-side", "kubectl apply --server-side -f cm-other.yaml", r"configmap/settings serverside-applied"),
        h("kubectl apply --server-side (a conflict)", "kubectl apply --server-side --field-manager=other -f cm.yaml",
          r'conflicts? with "kubectl[\s\S]*\.data\.mode', rc=1),
        h("kubectl apply --server-side --force-conflicts", "kubectl apply --server-side --field-manager=other --force-conflicts -f cm.yaml "
          "&& kubectl get cm settings -o jsonpath='{.data.mode}'", r"serverside-applied\s*fast"),
        h("kubectl get --show-managed-fields", "kubectl get cm settings -o yaml --show-managed-fields", r"managedFields:[\s\S]*manager: other"),
        h("kubectl delete -f", "kubectl delete -f cm.yaml", r'configmap "settings" deleted'),
        # workloads
        h("kubectl create deployment", "kubectl create deployment board --image=python:3.11 --replicas=2 -- python3 -m http.server 6006", r"deployment.apps/board created"),
        h("kubectl rollout status deploy", "kubectl rollout status deploy/board --timeout=150s", r'deployment "board" successfully rolled out', timeout=160),
        h("kubectl get deploy", "kubectl get deploy board", r"NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+board\s+2/2\s+2\s+2\s+"),
        h("kubectl get rs", "kubectl get rs -l app=board", r"NAME\s+DESIRED\s+CURRENT\s+READY\s+AGE\s+board-\w+\s+2\s+2\s+2"),
        h("kubectl scale deploy", "kubectl scale deploy board --replicas=3 && kubectl rollout status deploy/board --timeout=150s",
          r"deployment.apps/board scaled[\s\S]*successfully rolled out", timeout=160),
        h("kubectl set image", "kubectl set image deploy/board python=python:3.12 && kubectl rollout status deploy/board --timeout=150s",
          r"image updated[\s\S]*successfully rolled out", timeout=160),
        h("kubectl rollout history", "kubectl rollout history deploy/board", r"REVISION\s+CHANGE-CAUSE\s+1\s+<none>\s+2\s+<none>"),
        h("kubectl rollout undo", "kubectl rollout undo deploy/board && kubectl get deploy board -o jsonpath='{.spec.template.spec.containers[0].image}'",
          r"rolled back\s*python:3.11"),
        h("kubectl rollout restart", "kubectl rollout restart deploy/board && kubectl rollout status deploy/board --timeout=150s",
          r"restarted[\s\S]*successfully rolled out", timeout=160),
        h("kubectl rollout pause / resume", "kubectl rollout pause deploy/board && kubectl rollout resume deploy/board", r"paused\s*deployment.apps/board resumed"),
        h("kubectl autoscale", "kubectl autoscale deploy board --min=1 --max=3 --cpu-percent=50", r"horizontalpodautoscaler.autoscaling/board autoscaled"),
        h("kubectl get hpa", "kubectl get hpa board", r"board\s+Deployment/board\s+cpu: \S+/50%\s+1\s+3\s+\d+"),
        h("kubectl create job", "kubectl create job prep --image=python:3.11 -- python3 -c 'print(\"data ready\")'", r"job.batch/prep created"),
        h("kubectl wait --for=condition=complete job", "kubectl wait --for=condition=complete job/prep --timeout=120s", r"job.batch/prep condition met", timeout=130),
        h("kubectl logs job/", "kubectl logs job/prep", r"^data ready$"),
        h("kubectl get jobs", "kubectl get jobs prep", r"NAME\s+STATUS\s+COMPLETIONS\s+DURATION\s+AGE\s+prep\s+Complete\s+1/1"),
        h("kubectl create cronjob", "kubectl create cronjob tick --image=busybox --schedule='*/5 * * * *' -- echo tick", r"cronjob.batch/tick created"),
        h("kubectl get cronjob", "kubectl get cronjob tick", r"tick\s+\*/5 \* \* \* \*\s+<none>\s+False\s+0"),
        h("kubectl create job --from=cronjob", "kubectl create job tick-now --from=cronjob/tick && kubectl wait --for=condition=complete job/tick-now --timeout=120s "
          "&& kubectl logs job/tick-now", r"^tick$", timeout=130),
        h("kubectl apply (a StatefulSet)", "kubectl apply -f sts.yaml && kubectl rollout status sts/db --timeout=150s",
          r"statefulset.apps/db created[\s\S]*roll(ing update| out) complete", timeout=160),
        h("kubectl get sts", "kubectl get sts db", r"NAME\s+READY\s+AGE\s+db\s+2/2"),
        h("kubectl get pods (stable names)", "kubectl get pods -l app=db -o name", r"pod/db-0\npod/db-1"),
        h("kubectl scale sts", "kubectl scale sts db --replicas=1 && kubectl wait --for=delete pod/db-1 --timeout=120s "
          "&& kubectl get pods -l app=db -o name", r"scaled[\s\S]*^pod/db-0\Z", timeout=130),
        h("kubectl apply (a DaemonSet)", "kubectl apply -f ds.yaml && kubectl rollout status ds/agent --timeout=150s",
          r'daemon set "agent" successfully rolled out', timeout=160),
        h("kubectl get ds", "kubectl get ds agent", r"agent\s+3\s+3\s+3\s+3\s+3\s+<none>"),
        h("kubectl create pdb", "kubectl create pdb board --selector=app=board --min-available=1", r"poddisruptionbudget.policy/board created"),
        h("kubectl get pdb", "for i in $(seq 30); do kubectl get pdb board | grep -q ' 1 ' && break; sleep 1; done; kubectl get pdb board",
          r"NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE\s+board\s+1\s+N/A\s+\d"),
        h("kubectl create priorityclass", "kubectl create priorityclass habits-high --value=1000 --description=habits", r"priorityclass.scheduling.k8s.io/habits-high created"),
        h("kubectl create quota", "kubectl create quota habits --hard=pods=50,count/configmaps=30", r"resourcequota/habits created"),
        h("kubectl get quota", "for i in $(seq 30); do kubectl get quota habits | grep -q 'pods: [1-9]' && break; sleep 1; done; kubectl get quota habits",
          r"habits\s+\S+\s+.*pods: \d+/50"),
        h("kubectl apply (a LimitRange) + describe limits", "kubectl apply -f limits.yaml && kubectl describe limits limits", r"Container\s+memory\s+-\s+-\s+64Mi\s+512Mi"),
        h("kubectl get all", "kubectl get all", r"pod/web[\s\S]*service/web[\s\S]*deployment.apps/board[\s\S]*replicaset.apps/board-"),
        # nodes
        h("kubectl label node", f"kubectl label node {node} disk=ssd", rf"node/{node} labeled"),
        h("kubectl taint / untaint", f"kubectl taint nodes {node} habit=yes:NoSchedule && kubectl taint nodes {node} habit-",
          rf"node/{node} tainted\s*node/{node} untainted"),
        h("kubectl cordon / uncordon", f"kubectl cordon {node} && kubectl get node {node} && kubectl uncordon {node}",
          r"cordoned[\s\S]*Ready,SchedulingDisabled[\s\S]*uncordoned"),
        h("kubectl drain", f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --force --timeout=150s && kubectl uncordon {node}",
          rf"node/{node} drained", timeout=170),
        # debugging
        h("kubectl debug (ephemeral container)", "kubectl debug web -i --image=busybox --target=web --container=dbg -- sh -c 'sleep 3; echo from-debug' < /dev/null",
          r"from-debug"),
        h("kubectl debug --copy-to", "kubectl debug web --copy-to=web-copy --image=busybox --container=copy -- sleep 30 && kubectl get pod web-copy -o name",
          r"pod/web-copy"),
        h("kubectl debug node/", f"kubectl debug node/{node} -i --image=busybox -- sh -c 'sleep 3; echo from-node' < /dev/null", r"from-node"),
        # training jobs
        h("kubectl apply (a PyTorchJob)", f"kubectl apply -f {REPO}/samples/pytorch/ddp.yaml", r"pytorchjob.kubeflow.org/pytorch-ddp created"),
        h("kubectl get pytorchjobs", "kubectl get pytorchjobs", r"NAME\s+STATE\s+AGE\s+pytorch-ddp"),
        h("kubectl wait --for=condition=Succeeded pytorchjob", "kubectl wait --for=condition=Succeeded pytorchjob/pytorch-ddp --timeout=300s",
          r"condition met", timeout=310),
        h("kubectl describe pytorchjob", "kubectl describe pytorchjob pytorch-ddp", r"Succeeded[\s\S]*Events:"),
        h("kubectl logs (a job's master)", "kubectl logs pytorch-ddp-master-0", r"\S"),
        h("kubectl delete pytorchjob", "kubectl delete pytorchjob pytorch-ddp", r'pytorchjob.kubeflow.org "pytorch-ddp" deleted'),
        # clean-up
        h("kubectl delete pod --grace-period=0 --force", "kubectl delete pod crash --grace-period=0 --force", r'pod "crash" force deleted'),
        h("kubectl delete ns (Terminating)", f"kubectl delete ns {NS} --wait=false && kubectl get ns {NS}", rf"{NS}\s+Terminating"),
        h("kubectl wait --for=delete ns", f"kubectl wait --for=delete ns/{NS} --timeout=150s", rf"namespace/{NS} condition met", timeout=160),
    ]


def run(habit: Habit, env: dict[str, str], cwd: Path) -> tuple[bool, str]:
    try:
        result = subprocess.run(["bash", "-c", habit.command], env=env, cwd=cwd, capture_output=True,
                                text=True, timeout=habit.timeout)
        out, rc = (result.stdout + result.stderr).strip(), result.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = f"timed out after {habit.timeout:.0f}s: {exc.stdout or ''}{exc.stderr or ''}", -1
    ok = rc == habit.rc and re.search(habit.expect, out, re.MULTILINE) is not None
    return ok, f"exit {rc}: {out}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="run only the habits whose form matches this regex (and every one before them)")
    parser.add_argument("--verbose", action="store_true", help="print every habit's output")
    args = parser.parse_args()
    if not shutil.which("kubectl"):
        print("kubectl is not on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="trainctl-habits-") as tmp:
        root = Path(tmp)
        scratch = root / "work"
        scratch.mkdir()
        for name, text in FILES.items():
            (scratch / name).write_text(text.lstrip())
        started = time.monotonic()
        with LocalCluster(root / "cluster", workdir=REPO, nodes=3) as cluster:
            home = root / "home"
            (home / ".kube").mkdir(parents=True)
            shutil.copy(cluster.kubeconfig, home / ".kube" / "config")
            env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(home / ".kube" / "config")}
            chosen = habits(NODE)
            if args.only:
                last = max((i for i, h in enumerate(chosen) if re.search(args.only, h.form)), default=-1)
                chosen = chosen[:last + 1]
            failed: list[tuple[Habit, str]] = []
            for number, habit in enumerate(chosen, 1):
                ok, out = run(habit, env, scratch)
                print(f"{number:3} {'ok  ' if ok else 'FAIL'} {habit.form}", flush=True)
                if not ok or args.verbose:
                    print("      " + (out if args.verbose else out[-1500:]).replace("\n", "\n      "), flush=True)
                if not ok:
                    failed.append((habit, out))
        print(f"\n{len(chosen) - len(failed)} of {len(chosen)} habits behave as on a real cluster "
              f"({time.monotonic() - started:.0f} s)")
        for habit, _ in failed:
            print(f"  failed: {habit.form}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
