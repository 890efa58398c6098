"""Job outputs and inputs on the node (issue 24): collect an ended container's declared paths into the agent's
spool, upload them to the control plane, and place a job's inputs before its command starts."""
