"""Race: plain decoding of the target against speculative decoding, same prompt and settings."""
import streamlit as st

from specviz import charts, lab, ui

ui.page_guard()

PAGE = "race"

st.html('<div class="sv-kicker">Measured, not simulated</div>')
st.title("Race: plain decoding against speculative decoding")
left, right = st.columns([3, 2], gap="large")
with left:
    st.markdown(
        "The same prompt and settings run twice: first speculative decoding (draft + target), then plain decoding "
        "(the target alone, one pass per token). They run **one after the other**, never at the same time, so "
        "neither steals the other's processor. Then both are replayed side by side **on a shared clock**: each token "
        "appears at the moment it was actually produced.")
with right:
    st.markdown("The speed-up is the ratio of decode rates (the prompt is processed once by both, and left out):")
    st.latex(r"\text{speed-up} = \frac{\text{tokens/s (speculative)}}{\text{tokens/s (plain)}}")
    st.markdown("With temperature 0 (greedy) both texts must be **identical**: the check below proves it for this run.")

settings = ui.settings()
with st.container(border=True):
    prompt = ui.prompt_picker(PAGE)
    c1, c2 = st.columns([1.2, 5], vertical_alignment="center")
    run = c1.button("Start the race", icon=":material/sports_score:", type="primary", key=f"{PAGE}.run",
                    disabled=ui.busy(PAGE), width="stretch")
    c2.caption("Uses the sidebar's settings. On a CPU the target is slow: 32 tokens take a while for each method.")
    if run:
        ui.launch(PAGE, settings, ui.trace_work(prompt, settings.config, settings.chat, baseline=True), prompt=prompt)
    ui.show_error(PAGE)
    uploaded = None
    with st.expander("Replay a saved run instead (it must include plain decoding)"):
        uploaded = ui.trace_upload(PAGE)
    if uploaded is not None:
        if uploaded.baseline_summary is None:
            st.error("This run has no plain-decoding part to race against; run it here, or on the Step through page "
                     "with 'Also time plain decoding' ticked.")
        else:
            ui.adopt_trace(PAGE, uploaded, "uploaded run")
            ui.start_replay(PAGE)

ui.live_panel(PAGE, ui.race_live)
finished = ui.take_finished(PAGE)
if finished is not None and finished.result is not None:
    ui.adopt_trace(PAGE, finished.result, "race")
    ui.start_replay(PAGE)

if not ui.busy(PAGE):
    trace = st.session_state.get(f"{PAGE}.trace")
    if trace is None:
        with_baseline = [(n, t) for n, t in ui.recorded_traces() if t.baseline_summary is not None]
        step_trace = st.session_state.get("step.trace")
        if step_trace is not None and step_trace.baseline_summary is not None:
            trace = step_trace
        elif with_baseline:
            trace = with_baseline[0][1]
    if trace is None:
        st.info("Press **Start the race** to run both methods on the prompt above.")
    else:
        ui.stopped_note(trace)
        identity = lab.greedy_identity(trace)
        if identity.checked and identity.identical:
            st.success("Identical texts: in greedy mode speculative decoding wrote exactly what the target alone "
                       f"wrote ({trace.summary.new_tokens} tokens).")
        elif identity.checked:
            st.error(f"✗ The texts differ from token {identity.first_difference + 1} on. In greedy mode they should be "
                     "identical; tiny floating-point differences between a batched verify pass and single steps can "
                     "flip a near-tie between two tokens.")
        else:
            st.info("With temperature > 0 the two runs draw different random samples, so their texts differ; "
                    "both follow the same distribution (see the Lossless page).")
        ui.race_replay(PAGE, trace)

        st.subheader("Where the time goes")
        g1, g2 = st.columns([3, 2], gap="large")
        with g1:
            st.plotly_chart(charts.timeline_figure(trace), key=f"{PAGE}.timeline", config={"displayModeBar": False})
            st.plotly_chart(charts.progress_figure(trace), key=f"{PAGE}.progress", config={"displayModeBar": False})
        with g2:
            costs = lab.cost_breakdown(trace)
            if costs is not None:
                m1, m2 = st.columns(2)
                m1.metric("One plain step", f"{costs.target_step * 1000:.0f} ms" if costs.target_step else "—")
                m2.metric("One verify pass", f"{costs.verify * 1000:.0f} ms",
                          help="One target forward over the drafted tokens (and the last committed one).")
                m1.metric("One draft forward", f"{costs.draft_forward * 1000:.0f} ms" if costs.draft_forward else "none",
                          help="The n-gram drafter has no model: drafting is almost free.")
                m2.metric("Tokens per round", f"{costs.tokens_per_round:.2f}")
                steps = costs.verify_in_steps
                st.markdown(
                    "Each round is a **draft** phase (γ small forwards, teal) then one **verify** pass (indigo). "
                    "Speculation pays when the tokens gained per round outweigh the round's cost:")
                st.latex(r"\text{speed-up} \approx \frac{\text{tokens per round} \times t_\text{step}}"
                         r"{t_\text{draft phase} + t_\text{verify}}")
                if steps is not None:
                    st.markdown(
                        f"Here one verify pass cost **{steps:.1f}** plain steps. On a GPU, checking a few tokens at once "
                        "costs about as much as one (the weights are read once either way); on a CPU it costs more, "
                        "so acceptance must be higher to win.")
        ui.trace_download(trace, key=f"{PAGE}.download")
