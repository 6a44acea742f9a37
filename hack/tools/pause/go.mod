// The pause program of the test node's sandbox image: holds a pod's namespaces open.
module agentic-operator/hack/tools/pause

go 1.26.0
