'use strict';
// Agent-observation ops that every driver reaches through a raw CDP session of its own
// (`session.cdp(method, params)`): the full AX tree, one AX node's identity, computed-style breadth.

const DEFAULT_REQUIRED = ['display', 'visibility', 'opacity', 'pointer-events'];

function axValue(field) {
  return field && field.value !== undefined ? String(field.value) : '';
}

async function axSnapshot(session) {
  const tree = await session.cdp('Accessibility.getFullAXTree', {});
  return (tree.nodes || []).map((n) => ({
    role: axValue(n.role),
    name: axValue(n.name),
    backendDOMNodeId: n.backendDOMNodeId,
    ignored: !!n.ignored,
  }));
}

async function axNodeIdentity(session, step, state) {
  const nodes = await axSnapshot(session);
  const match = nodes.find((n) => !n.ignored && n.role === step.role && n.name === step.name);
  if (!match) throw new Error(`no AX node with role=${step.role} name=${step.name}`);
  const identity = `role=${match.role}|name=${match.name}|backendDOMNodeId=${match.backendDOMNodeId}`;
  if (!step.compare_to) return identity;
  const before = state.saved[step.compare_to];
  return `${before === identity ? 'stable' : 'changed'}|${identity}`;
}

async function computedStyleBreadth(session, step) {
  const doc = await session.cdp('DOM.getDocument', { depth: 0 });
  const found = await session.cdp('DOM.querySelector', { nodeId: doc.root.nodeId, selector: step.selector });
  if (!found.nodeId) throw new Error(`no element for ${step.selector}`);
  await session.cdp('CSS.enable', {});
  const style = await session.cdp('CSS.getComputedStyleForNode', { nodeId: found.nodeId });
  const values = new Map((style.computedStyle || []).map((p) => [p.name, p.value]));
  const minimum = step.min_property_count || 100;
  const required = step.required_properties || DEFAULT_REQUIRED;
  const verdict = values.size >= minimum ? 'breadth-ok' : 'breadth-short';
  const parts = required.map((name) => `${name}=${values.has(name) ? values.get(name) : 'MISSING'}`);
  return [`${verdict}`, `count=${values.size}`, ...parts].join('|');
}

module.exports = {
  ax_snapshot: (session) => axSnapshot(session),
  ax_node_identity: axNodeIdentity,
  computed_style_breadth: computedStyleBreadth,
};
