// Package tbevents writes TensorBoard event files: scalars, text and hparams summaries of a
// run, readable by `tensorboard --logdir` and by TensorBoard's EventAccumulator.
//
// A file is a TFRecord stream of tensorboard.Event protobufs
// (tensorboard/compat/proto/event.proto, summary.proto, tensor.proto):
//
//	record  = uint64 length (LE) | uint32 masked CRC-32C of the length bytes (LE)
//	          | data | uint32 masked CRC-32C of data (LE)
//	masked  = ((crc >> 15) | (crc << 17)) + 0xa282ead8      CRC-32C is Castagnoli's polynomial
//
// Each Writer writes one new file, dir/events.out.tfevents.<unix seconds, 10 digits>.<host>,
// whose first event is file_version "brain.Event:2". TensorBoard reads every event file of a
// directory in lexicographic name order, so Open picks a name that sorts after every event
// file already in dir (it moves the seconds forward when the clock says otherwise).
//
// What is written:
//
//	Scalar    Summary.Value{tag, simple_value}: a float32, so TensorBoard shows
//	          float32(v). It is the form both TensorBoard readers accept as a scalar
//	          (RustBoard's scalars are f32 and it refuses a DT_DOUBLE tensor).
//	Text      Summary.Value{tag, metadata{plugin_data{plugin_name "text"}}, tensor}: a rank-0
//	          DT_STRING tensor, rendered as Markdown by the text plugin
//	          (tensorboard/plugins/text/summary_v2.py, metadata.py, text_plugin.py).
//	HParams   tag "_hparams_/session_start_info" at step 0, metadata plugin_name "hparams",
//	          content a HParamsPluginData{version 0, session_start_info{hparams map<string,
//	          google.protobuf.Value>, start_time_secs}}, tensor the plugin's NULL_TENSOR
//	          (DT_FLOAT, shape [0]) (tensorboard/plugins/hparams/summary_v2.py hparams_pb,
//	          metadata.py, plugin_data.proto). Strings, bools and numbers only.
//	SessionStart  Event{step, session_log{status START}}.
//
// The summary metadata of a tag is written with its first value in each file, as TensorFlow's
// writer does; TensorBoard keeps the first metadata it reads for a tag in a run.
//
// # Resume and rollback
//
// Call SessionStart(step) once when a session begins, fresh or resumed, before any summary,
// with the first step the session will write; call it again when the run rolls back to an
// earlier step. The two TensorBoard readers then agree on one curve per tag, made of the
// values of the history that led to the current weights (as metrics.jsonl is):
//
//   - The Python reader (tensorboard/backend/event_processing/plugin_event_accumulator.py,
//     _MaybePurgeOrphanedData, _CheckForRestartAndMaybePurge, _Purge; used with
//     --load_fast=false, and where the data server cannot run): for file_version >= 2, the
//     first SessionLog START of a run is taken as its start; each later one purges every
//     event of every tag with step >= its step read so far, from all earlier files. The
//     first session must therefore write a START too, or the first restart purges nothing.
//     The older event_accumulator.py EventAccumulator (its Scalars reads simple_value) purges
//     at every START, first included, to the same effect.
//   - RustBoard, the data server TensorBoard starts by default (--load_fast=auto, where the
//     tensorboard-data-server package is installed; tensorboard/program.py,
//     tensorboard/data/server/reservoir.rs "Preemption"): it ignores session_log; a value of
//     a tag at step s drops that tag's earlier values with step >= s, so each tag's old
//     points go when the resumed run logs that tag again.
//
// Both readers therefore keep one value per tag and step. A Writer makes the same rule loud:
// within a session each tag's steps must increase, and never go below the session's start; a
// summary that breaks it is a *StepError, not a silently hidden point. Several texts at one
// step go in one Text (a Markdown list or table) or under distinct tags.
//
// A Writer is for one goroutine. Writes are buffered: Flush makes them visible to a reader
// (flushing after each step is the caller's choice), Close flushes, syncs and closes. After a
// failed write the Writer returns that error from every later call.
package tbevents
