-- Argo CD health check for agentrun.dev AgentRun, modelled on the one Argo CD
-- ships for Tekton's TaskRun. Install it in the argocd-cm ConfigMap under the
-- key resource.customizations.health.agentrun.dev_AgentRun (see README.md
-- beside this file). Tested against every state the controller writes by
-- controllers/health_test.go.
--
-- An AgentRun is one run, so its health is its outcome, read from the
-- Succeeded condition:
--   Progressing  the run has not ended (Succeeded Unknown: pending, queued,
--                running), the controller has not written status yet, or it
--                has not seen the latest spec (observedGeneration behind
--                metadata.generation: spec.stop was just set)
--   Healthy      the run finished (Succeeded True)
--   Degraded     the run ended any other way (Succeeded False): failed,
--                timeout, limit, cancelled, a Pod that died; the reason
--                and detail are in the message
local hs = { status = "Progressing", message = "Waiting for the agentrun controller to pick up the run" }
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Pending deletion"
  return hs
end
if obj.status == nil then
  return hs
end
if obj.metadata ~= nil and obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "Waiting for the agentrun controller to observe the latest spec"
  return hs
end
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Succeeded" then
      if condition.status == "True" then
        hs.status = "Healthy"
      elseif condition.status == "False" then
        hs.status = "Degraded"
      end
      hs.message = condition.reason
      if condition.message ~= nil and condition.message ~= "" then
        hs.message = condition.reason .. ": " .. condition.message
      end
      return hs
    end
  end
end
return hs
