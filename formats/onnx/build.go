package onnx

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"
)

// Versions gquant writes: opset 21 of the default domain, IR version 10 (the IR of opset 21).
const (
	Opset     = 21
	IRVersion = 10
)

// NewModel returns a model around graph with gquant as producer.
func NewModel(graph *GraphProto, producerVersion string) *ModelProto {
	return &ModelProto{
		IrVersion:       proto.Int64(IRVersion),
		OpsetImport:     []*OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(Opset)}},
		ProducerName:    proto.String("gquant"),
		ProducerVersion: proto.String(producerVersion),
		Graph:           graph,
	}
}

// Node returns a node of the default domain.
func Node(op, name string, inputs, outputs []string, attrs ...*AttributeProto) *NodeProto {
	return &NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: inputs, Output: outputs, Attribute: attrs}
}

// AttrInt is an integer attribute.
func AttrInt(name string, v int64) *AttributeProto {
	return &AttributeProto{Name: proto.String(name), Type: AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// AttrInts is an integer-list attribute.
func AttrInts(name string, v ...int64) *AttributeProto {
	return &AttributeProto{Name: proto.String(name), Type: AttributeProto_INTS.Enum(), Ints: v}
}

// AttrFloat is a float attribute.
func AttrFloat(name string, v float32) *AttributeProto {
	return &AttributeProto{Name: proto.String(name), Type: AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

// ValueInfo describes a tensor of elem type t; a dimension given as a string in dims is
// symbolic (dim_param), an int64 is fixed.
func ValueInfo(name string, t TensorProto_DataType, dims ...any) *ValueInfoProto {
	shape := &TensorShapeProto{}
	for _, d := range dims {
		switch x := d.(type) {
		case string:
			shape.Dim = append(shape.Dim, &TensorShapeProto_Dimension{Value: &TensorShapeProto_Dimension_DimParam{DimParam: x}})
		case int64:
			shape.Dim = append(shape.Dim, &TensorShapeProto_Dimension{Value: &TensorShapeProto_Dimension_DimValue{DimValue: x}})
		case int:
			shape.Dim = append(shape.Dim, &TensorShapeProto_Dimension{Value: &TensorShapeProto_Dimension_DimValue{DimValue: int64(x)}})
		}
	}
	return &ValueInfoProto{Name: proto.String(name), Type: &TypeProto{Value: &TypeProto_TensorType{
		TensorType: &TypeProto_Tensor{ElemType: proto.Int32(int32(t)), Shape: shape}}}}
}

// rawTensor is an initializer with raw little-endian data.
func rawTensor(name string, t TensorProto_DataType, dims []int64, raw []byte) *TensorProto {
	return &TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(t)), Dims: dims, RawData: raw}
}

// FloatTensor is a float32 initializer.
func FloatTensor(name string, dims []int64, v []float32) *TensorProto {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return rawTensor(name, TensorProto_FLOAT, dims, b)
}

// Int64Tensor is an int64 initializer.
func Int64Tensor(name string, dims []int64, v []int64) *TensorProto {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return rawTensor(name, TensorProto_INT64, dims, b)
}

// Int8Tensor is an int8 initializer.
func Int8Tensor(name string, dims []int64, v []int8) *TensorProto {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return rawTensor(name, TensorProto_INT8, dims, b)
}

// Uint16Tensor is a uint16 initializer.
func Uint16Tensor(name string, dims []int64, v []uint16) *TensorProto {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return rawTensor(name, TensorProto_UINT16, dims, b)
}

// Uint8Tensor is a uint8 initializer.
func Uint8Tensor(name string, dims []int64, v []uint8) *TensorProto {
	return rawTensor(name, TensorProto_UINT8, dims, append([]byte(nil), v...))
}

// Int4Tensor is an int4 initializer: values in [−8, 7], packed two per byte, the first in
// the low nibble (ONNX's layout).
func Int4Tensor(name string, dims []int64, v []int8) *TensorProto {
	b := make([]byte, (len(v)+1)/2)
	for i, x := range v {
		b[i/2] |= byte(x&0xF) << (4 * (i % 2))
	}
	return rawTensor(name, TensorProto_INT4, dims, b)
}
