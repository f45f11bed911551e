"""Names vulture (make lint) takes for unused that are used where it cannot see: by traitlets,
IPython, Jupyter, JAX signatures or the page. Written by `vulture --make-whitelist`."""

_jupyter_server_extension_points  # unused function
__dir__  # unused function
signum  # unused variable
event  # unused variable
_.refused_page_writes  # unused property
PAGE_HOLD  # unused variable
_.tick_rotate  # unused attribute
_.tick_style  # unused attribute
_.label_offset  # unused attribute
_.fig_margin  # unused attribute
_.height  # unused attribute
_.tick_values  # unused attribute
_.on_log_scale  # unused property
_.set_log  # unused method
_.tick_values  # unused attribute
_.tick_values  # unused attribute
_.__doc__  # unused attribute
_.__doc__  # unused attribute
__dir__  # unused function
holomorphic  # unused variable
allow_int  # unused variable
reduce_axes  # unused variable
holomorphic  # unused variable
allow_int  # unused variable
reduce_axes  # unused variable
axis_name  # unused variable
spmd_axis_name  # unused variable
ans  # unused variable
ans  # unused variable
ans  # unused variable
ans  # unused variable
__instancecheck__  # unused function
newaxis  # unused variable
float16  # unused variable
int8  # unused variable
int16  # unused variable
uint8  # unused variable
ones_like  # unused variable
empty_like  # unused variable
full_like  # unused function
ans  # unused variable
absolute  # unused variable
indices_are_sorted  # unused variable
mode  # unused variable
unique_indices  # unused variable
_.subtract  # unused method
mul  # unused variable
_.divide  # unused method
_.apply  # unused method
_.flatten_up_to  # unused method
_.key_path  # unused attribute
_.key_path  # unused attribute
load_ipython_extension  # unused function
caption  # unused variable
_._valid_selection  # unused method
_._valid_collapsed  # unused method
_._send_opened  # unused method
_._open_to_selection  # unused method
__call__  # unused function
_._repr_pretty_  # unused method
cycle  # unused variable
restored  # unused variable
_.writable  # unused method
_.restored  # unused attribute
_.__traceback__  # unused attribute
_.to_markdown  # unused method
busy  # unused variable
buffers  # unused variable
solution_available  # unused variable
_.intents_received  # unused attribute
_.checks_run  # unused attribute
_.intents_received  # unused attribute
_.checks_run  # unused attribute
_.busy  # unused attribute
_.solution_available  # unused attribute
_.busy  # unused attribute
_.solution_available  # unused attribute
_._rated  # unused method
_.busy  # unused attribute
_.busy  # unused attribute
answer_index  # unused variable
_._locked  # unused method
_.answer_index  # unused attribute
saved_path  # unused variable
_.saved_path  # unused attribute
_.saved_path  # unused attribute
_.set_params  # unused method
_.flex  # unused attribute
_.min_width  # unused attribute
_.height  # unused attribute
_.flex  # unused attribute
_.min_width  # unused attribute
_.min_width  # unused attribute
_.flex  # unused attribute
_.__suppress_context__  # unused attribute
_.late  # unused attribute
_.compute_s  # unused attribute
_.wait_s  # unused attribute
_.late  # unused attribute
_.compute_s  # unused attribute
_.wait_s  # unused attribute
_.wait_s  # unused attribute
_.late  # unused attribute
_.compute_s  # unused attribute
_.ignored  # unused attribute
buffers  # unused variable
_.ignored  # unused attribute
_.caption  # unused attribute
_._valid_selection  # unused method
_._selection_changed  # unused method
layouts_data  # unused variable
_.select_leaf  # unused method
_.select_position  # unused method
_._on_selected  # unused method
_.__doc__  # unused attribute
_load_jupyter_server_extension  # unused function
_.kernel_websocket_connection_class  # unused attribute
_.help  # unused attribute
_._module_fixed  # unused attribute
_.moves  # unused attribute
_._widen  # unused method
buffers  # unused variable
_.moves  # unused attribute
TRIMS  # unused variable
TRIMS  # unused variable
_.wait_compiled  # unused method
_join_compiles  # unused function
_.__class__  # unused attribute
_.autosave_error  # unused attribute (Evidence: why the last automatic save failed, for its reader)
_.f_trace  # unused attribute (a frame's tracer: Python reads it)
_.display_legend  # unused attribute (bqplot's)
_.num_ticks  # unused attribute (bqplot's)
_.transport  # unused attribute (jupyter_client's KernelManager reads it: the sandboxed kernel's ipc sockets)
_.ip  # unused attribute (jupyter_client's KernelManager reads it)
_.export  # unused method (nbgrader's ExportPlugin: `nbgrader export --exporter=...` calls it)
_.marker  # unused attribute (bqplot's Lines: a dot at each point while the comparison has few)
opt_states  # unused variable (OptimizerComparison.opt_states: public, each optimizer's state now)
jacfwd  # unused function (pytree_lab_lite.jax: imported on first use, by name in _ARRAY_PARTS)
hessian  # unused function (pytree_lab_lite.jax: imported on first use, by name in _ARRAY_PARTS)
block_until_ready  # unused function (pytree_lab_lite.jax: imported on first use, by name in _ARRAY_PARTS)
vmap  # unused function (pytree_lab_lite.jax: imported on first use, by name in _ARRAY_PARTS)
_.auto_score  # unused attribute (nbgrader's gradebook: MarkRegrades writes it)
_.needs_manual_grade  # unused attribute (nbgrader's gradebook)
_.f_trace_lines  # unused attribute (CPython reads it: no line events in library frames)
_.ask_exit  # unused attribute (IPython calls it: exit() refused while guarded code runs)
