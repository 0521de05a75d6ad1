-- The report's section of part 1 (scripts/part1_bias.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local R = xsa.report
local f4 = R.f4

return {
  title = "Part 1: self-value bias of an untrained model",
  command = "xsa scripts/part1_bias.lua",
  paper = "the diagnostic of the paper's Figure 1 (attention similarity bias), at toy scale on an untrained 2-layer model",
  about = "A freshly initialised model (standard attention) reads the validation batches of the first 80,000 " ..
    "tokens of TinyStories. For every layer the probe averages three quantities over heads, tokens and batches: " ..
    "how similar the value vectors of different tokens are (mean cos(v_i, v_j), i ≠ j), how much attention a " ..
    "token pays to itself (mean a_ii), and how closely a token's attention output y_i = Σ_j a_ij v_j points " ..
    "along its own value vector (mean cos(y_i, v_i)). The last one is the self-value component that XSA removes.",
  explain = {"Why it matters: every block adds the attention output to the residual stream, and that stream " ..
    "already carries the token's own representation on to the MLP and the next layer. When the attention output " ..
    "leans towards the token's own value, attention partly repeats what the residual path delivers anyway, and " ..
    "that share of its output adds nothing new. Two ingredients produce the lean, and the probe shows both: values " ..
    "within a sequence point in similar directions, and every token keeps some attention weight on itself."},
  words = function(s)
    local r = s.result or {}
    local out = {}
    for l, m in ipairs(r.layers or {}) do
      out[#out + 1] = string.format("Layer %d: mean cos(v_i,v_j) = %s, mean a_ii = %s, mean cos(y_i,v_i) = %s at positions ≥ 1 (%s over all positions).",
        l, f4(m.value_cos), f4(m.self_attn), f4(m.pre_cos_pos1), f4(m.pre_cos))
    end
    if r.probe_batches then
      out[#out + 1] = string.format("Measured on %d %s batches (%d tokens).", r.probe_batches,
        r.split == "val" and "validation" or "training", r.tokens or 0)
    end
    return out
  end,
}
