package tbevents

import (
	"math"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers, from tensorboard/compat/proto/{event,summary,tensor,tensor_shape,types}.proto,
// tensorboard/plugins/hparams/plugin_data.proto and google/protobuf/struct.proto.
const (
	eventWallTime       = 1 // double
	eventStep           = 2 // int64
	eventFileVersion    = 3 // string
	eventSummary        = 5 // Summary
	eventSessionLog     = 7 // SessionLog
	eventSourceMetadata = 10

	sourceMetadataWriter = 1

	sessionLogStatus = 1 // SessionLog.SessionStatus
	sessionStart     = 1 // SessionLog.START

	summaryValue = 1 // repeated Summary.Value

	valueTag         = 1
	valueSimpleValue = 2 // float
	valueTensor      = 8 // TensorProto
	valueMetadata    = 9 // SummaryMetadata

	metadataPluginData = 1
	pluginDataName     = 1
	pluginDataContent  = 2

	tensorDtype     = 1
	tensorShape     = 2
	tensorStringVal = 8
	shapeDim        = 2
	dtFloat         = 1 // DataType.DT_FLOAT
	dtString        = 7 // DataType.DT_STRING

	hparamsSessionStartInfo = 3 // HParamsPluginData.session_start_info
	startInfoHParams        = 1 // map<string, google.protobuf.Value>
	startInfoStartTimeSecs  = 5 // double
	mapKey                  = 1
	mapValue                = 2
	structNumberValue       = 2 // google.protobuf.Value.number_value
	structStringValue       = 3
	structBoolValue         = 4
)

const (
	fileVersion   = "brain.Event:2"
	sourceWriter  = "rookscript"
	hparamsTag    = "_hparams_/session_start_info"
	textPlugin    = "text"
	hparamsPlugin = "hparams"
)

func wallSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// appendEventHead starts an Event: its wall time and step. Proto3 leaves a zero step out.
func appendEventHead(b []byte, step int64, wall time.Time) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallSeconds(wall)))
	if step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(step))
	}
	return b
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

func fileVersionEvent(wall time.Time) []byte {
	b := appendEventHead(nil, 0, wall)
	b = appendString(b, eventFileVersion, fileVersion)
	return appendMessage(b, eventSourceMetadata, appendString(nil, sourceMetadataWriter, sourceWriter))
}

func sessionStartEvent(step int64, wall time.Time) []byte {
	b := appendEventHead(nil, step, wall)
	var log []byte
	log = protowire.AppendTag(log, sessionLogStatus, protowire.VarintType)
	log = protowire.AppendVarint(log, sessionStart)
	return appendMessage(b, eventSessionLog, log)
}

// summaryEvent wraps one Summary.Value in an Event.
func summaryEvent(step int64, wall time.Time, value []byte) []byte {
	b := appendEventHead(nil, step, wall)
	return appendMessage(b, eventSummary, appendMessage(nil, summaryValue, value))
}

func scalarValue(tag string, v float64) []byte {
	b := appendString(nil, valueTag, tag)
	b = protowire.AppendTag(b, valueSimpleValue, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(float32(v)))
}

// pluginMetadata is a SummaryMetadata naming its plugin; an empty content is the plugin's
// version-0 data (TextPluginData{version: 0} serialises to no bytes).
func pluginMetadata(plugin string, content []byte) []byte {
	pd := appendString(nil, pluginDataName, plugin)
	if len(content) > 0 {
		pd = appendMessage(pd, pluginDataContent, content)
	}
	return appendMessage(nil, metadataPluginData, pd)
}

func textValue(tag, text string, withMetadata bool) []byte {
	b := appendString(nil, valueTag, tag)
	var t []byte
	t = protowire.AppendTag(t, tensorDtype, protowire.VarintType)
	t = protowire.AppendVarint(t, dtString)
	t = appendMessage(t, tensorShape, nil) // no dims: a scalar, rendered as one Markdown block
	t = appendString(t, tensorStringVal, text)
	b = appendMessage(b, valueTensor, t)
	if withMetadata {
		b = appendMessage(b, valueMetadata, pluginMetadata(textPlugin, nil))
	}
	return b
}

// hparamsValue is hparams_pb's summary value: the data lives in the metadata, the tensor is
// the plugin's NULL_TENSOR, a DT_FLOAT of shape [0].
func hparamsValue(hp map[string]hparam, start time.Time) []byte {
	keys := make([]string, 0, len(hp))
	for k := range hp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var info []byte
	for _, k := range keys {
		v := hp[k]
		var val []byte
		switch v.kind {
		case hparamBool:
			val = protowire.AppendTag(val, structBoolValue, protowire.VarintType)
			val = protowire.AppendVarint(val, protowire.EncodeBool(v.b))
		case hparamNumber:
			val = protowire.AppendTag(val, structNumberValue, protowire.Fixed64Type)
			val = protowire.AppendFixed64(val, math.Float64bits(v.f))
		case hparamString:
			val = appendString(val, structStringValue, v.s)
		}
		entry := appendString(nil, mapKey, k)
		entry = appendMessage(entry, mapValue, val)
		info = appendMessage(info, startInfoHParams, entry)
	}
	info = protowire.AppendTag(info, startInfoStartTimeSecs, protowire.Fixed64Type)
	info = protowire.AppendFixed64(info, math.Float64bits(wallSeconds(start)))
	content := appendMessage(nil, hparamsSessionStartInfo, info) // version 0: left out

	b := appendString(nil, valueTag, hparamsTag)
	var t []byte
	t = protowire.AppendTag(t, tensorDtype, protowire.VarintType)
	t = protowire.AppendVarint(t, dtFloat)
	t = appendMessage(t, tensorShape, appendMessage(nil, shapeDim, nil)) // one Dim of size 0, which proto3 leaves empty
	b = appendMessage(b, valueTensor, t)
	return appendMessage(b, valueMetadata, pluginMetadata(hparamsPlugin, content))
}
